# The hosts that run kmirror, in the target data centre (an AWS region): EC2 instances spread over the
# given subnets/zones, reachable only over SSH from the operator's networks, allowed out only to the
# brokers of the source and target clusters (plus extra_egress), with encrypted root volumes and IMDSv2.

locals {
  ami_id = var.ami_id != null ? var.ami_id : try(data.aws_ami.this[0].id, null)

  instances = var.create ? { for i in range(var.instance_count) : "${var.name}-${i + 1}" => {
    index     = i
    subnet_id = var.subnet_ids[i % length(var.subnet_ids)]
  } } : {}

  # One TCP egress rule per (cluster, CIDR block, port).
  broker_egress_rules = var.create ? { for r in flatten([
    for e in var.broker_egress : [
      for c in e.cidr_blocks : [
        for p in e.ports : { key = "${e.name}/${c}/${p}", cluster = e.name, cidr = c, port = p }
      ]
    ]
  ]) : r.key => r } : {}

  extra_egress_rules = var.create ? { for r in flatten([
    for e in var.extra_egress : [
      for c in e.cidr_blocks : {
        key         = "${e.description}/${c}/${e.protocol}/${e.from_port}-${e.to_port}"
        description = e.description, cidr = c, protocol = e.protocol, from_port = e.from_port, to_port = e.to_port
      }
    ]
  ]) : r.key => r } : {}

  ssh_ingress_rules = var.create ? toset(var.operator_cidr_blocks) : toset([])

  create_iam            = var.create && var.create_iam_instance_profile
  instance_profile_name = local.create_iam ? aws_iam_instance_profile.this[0].name : var.iam_instance_profile_name
}

################################################################################
# Lookups
################################################################################

data "aws_ami" "this" {
  count = var.create && var.ami_id == null ? 1 : 0

  most_recent = true
  owners      = var.ami_owners

  filter {
    name   = "name"
    values = [var.ami_name_filter]
  }
  filter {
    name   = "architecture"
    values = ["x86_64"]
  }
  filter {
    name   = "virtualization-type"
    values = ["hvm"]
  }
}

data "aws_subnet" "this" {
  for_each = var.create ? toset(var.subnet_ids) : toset([])

  id = each.value
}

################################################################################
# Security group: SSH in from the operator, brokers (and extra_egress) out, nothing else.
# Terraform removes the allow-all egress rule AWS adds to a new group. The Amazon-provided DNS resolver,
# the Amazon Time Sync Service (169.254.169.123) and the instance metadata service are not filtered by
# security groups, so name resolution and NTP work without rules.
################################################################################

resource "aws_security_group" "this" {
  count = var.create ? 1 : 0

  name_prefix = "${var.name}-"
  description = "kmirror hosts ${var.name}: SSH from the operator, egress to the Kafka brokers only"
  vpc_id      = var.vpc_id
  tags        = merge(var.tags, { Name = var.name })

  lifecycle {
    create_before_destroy = true

    precondition {
      condition     = alltrue([for s in data.aws_subnet.this : s.vpc_id == var.vpc_id])
      error_message = "Every subnet in subnet_ids must belong to vpc_id."
    }
  }
}

resource "aws_vpc_security_group_ingress_rule" "ssh" {
  for_each = local.ssh_ingress_rules

  security_group_id = aws_security_group.this[0].id
  description       = "SSH from the operator (Ansible) network ${each.value}"
  ip_protocol       = "tcp"
  from_port         = var.ssh_port
  to_port           = var.ssh_port
  cidr_ipv4         = strcontains(each.value, ":") ? null : each.value
  cidr_ipv6         = strcontains(each.value, ":") ? each.value : null
  tags              = merge(var.tags, { Name = "${var.name}-ssh" })
}

resource "aws_vpc_security_group_egress_rule" "brokers" {
  for_each = local.broker_egress_rules

  security_group_id = aws_security_group.this[0].id
  description       = "Kafka brokers of cluster ${each.value.cluster}"
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_ipv4         = strcontains(each.value.cidr, ":") ? null : each.value.cidr
  cidr_ipv6         = strcontains(each.value.cidr, ":") ? each.value.cidr : null
  tags              = merge(var.tags, { Name = "${var.name}-${each.value.cluster}" })
}

resource "aws_vpc_security_group_egress_rule" "extra" {
  for_each = local.extra_egress_rules

  security_group_id = aws_security_group.this[0].id
  description       = each.value.description
  ip_protocol       = each.value.protocol
  from_port         = each.value.from_port
  to_port           = each.value.to_port
  cidr_ipv4         = strcontains(each.value.cidr, ":") ? null : each.value.cidr
  cidr_ipv6         = strcontains(each.value.cidr, ":") ? each.value.cidr : null
  tags              = merge(var.tags, { Name = "${var.name}-extra" })
}

################################################################################
# IAM: a role of its own with no permissions (kmirror calls no AWS API), for attaching e.g. SSM.
################################################################################

data "aws_iam_policy_document" "assume_role" {
  count = local.create_iam ? 1 : 0

  statement {
    sid     = "EC2AssumeRole"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "this" {
  count = local.create_iam ? 1 : 0

  name_prefix          = "${var.name}-"
  description          = "kmirror hosts ${var.name}"
  assume_role_policy   = data.aws_iam_policy_document.assume_role[0].json
  permissions_boundary = var.iam_role_permissions_boundary
  tags                 = merge(var.tags, { Name = var.name })
}

resource "aws_iam_role_policy_attachment" "this" {
  for_each = local.create_iam ? var.iam_role_policies : {}

  role       = aws_iam_role.this[0].name
  policy_arn = each.value
}

resource "aws_iam_instance_profile" "this" {
  count = local.create_iam ? 1 : 0

  name_prefix = "${var.name}-"
  role        = aws_iam_role.this[0].name
  tags        = merge(var.tags, { Name = var.name })
}

################################################################################
# Instances
################################################################################

resource "aws_placement_group" "this" {
  count = var.create && var.placement_strategy != null ? 1 : 0

  name     = var.name
  strategy = var.placement_strategy
  tags     = merge(var.tags, { Name = var.name })
}

resource "aws_instance" "this" {
  for_each = local.instances

  ami                         = local.ami_id
  instance_type               = var.instance_type
  subnet_id                   = each.value.subnet_id
  vpc_security_group_ids      = [aws_security_group.this[0].id]
  associate_public_ip_address = var.associate_public_ip_address
  key_name                    = var.key_name
  iam_instance_profile        = local.instance_profile_name
  placement_group             = try(aws_placement_group.this[0].id, null)
  monitoring                  = true
  ebs_optimized               = true
  disable_api_termination     = var.disable_api_termination

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required" # IMDSv2 only
    http_put_response_hop_limit = var.metadata_hop_limit
    instance_metadata_tags      = "disabled"
  }

  root_block_device {
    encrypted             = true
    kms_key_id            = var.kms_key_id
    volume_type           = var.root_volume_type
    volume_size           = var.root_volume_size
    delete_on_termination = true
    tags                  = merge(var.tags, { Name = each.key })
  }

  tags = merge(var.tags, { Name = each.key, "kmirror:role" = "worker" })

  lifecycle {
    # A newer image must not replace running mirror hosts behind the operator's back.
    ignore_changes = [ami]

    precondition {
      condition     = local.ami_id != null
      error_message = "No AMI: set ami_id, or check ami_owners and ami_name_filter."
    }
    precondition {
      condition     = local.instance_profile_name != null
      error_message = "Set iam_instance_profile_name when create_iam_instance_profile is false."
    }
  }
}
