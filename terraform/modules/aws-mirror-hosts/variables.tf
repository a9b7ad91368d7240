variable "create" {
  description = "Whether to create anything at all (terraform-aws-modules convention)."
  type        = bool
  default     = true
}

variable "name" {
  description = "Name of the mirror deployment: instances are <name>-1, <name>-2, ...; also prefixes the security group, IAM role and placement group (at most 37 characters: IAM name prefixes are limited to 38)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,35}[a-z0-9])?$", var.name))
    error_message = "name must be a DNS label of at most 37 characters (a-z, 0-9 and '-'): it prefixes the IAM role name."
  }
}

variable "tags" {
  description = "Tags for every resource (merged under each resource's own Name tag)."
  type        = map(string)
  default     = {}
}

################################################################################
# Instances
################################################################################

variable "instance_count" {
  description = "How many mirror hosts (each runs one kmirror instance per source cluster; the instances of a source share its consumer group, so the hosts share its partitions)."
  type        = number
  default     = 2

  validation {
    condition     = var.instance_count >= 1 && floor(var.instance_count) == var.instance_count
    error_message = "instance_count must be a positive integer."
  }
}

variable "instance_type" {
  description = "EC2 instance type. The mirror is network-bound: pick a type with enough sustained bandwidth for the replicated traffic."
  type        = string
  default     = "m6i.large"
}

variable "ami_id" {
  description = "AMI of the hosts; null: the latest image matching ami_name_filter from ami_owners (Debian 12, whose Python 3.11 the roles build wheels for). Changes of the AMI are ignored on existing instances (replace them one at a time on purpose)."
  type        = string
  default     = null
}

variable "ami_owners" {
  description = "Owners searched when ami_id is null (136693071363: Debian's official images)."
  type        = list(string)
  default     = ["136693071363"]
}

variable "ami_name_filter" {
  description = "Image name pattern searched when ami_id is null."
  type        = string
  default     = "debian-12-amd64-*"
}

variable "vpc_id" {
  description = "VPC of the target data centre (region) the hosts run in."
  type        = string

  validation {
    condition     = startswith(var.vpc_id, "vpc-")
    error_message = "vpc_id must be a VPC ID (vpc-...)."
  }
}

variable "subnet_ids" {
  description = "Private subnets of vpc_id, ideally one per availability zone: host i goes to subnet_ids[i % length(subnet_ids)], so the hosts spread over the zones."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0 && alltrue([for s in var.subnet_ids : startswith(s, "subnet-")])
    error_message = "subnet_ids must hold at least one subnet ID (subnet-...)."
  }
  validation {
    condition     = length(distinct(var.subnet_ids)) == length(var.subnet_ids)
    error_message = "subnet_ids must not repeat a subnet."
  }
}

variable "placement_strategy" {
  description = "Placement group strategy: \"spread\" puts every host on distinct hardware (at most 7 per zone); null: no placement group."
  type        = string
  default     = "spread"

  validation {
    condition     = var.placement_strategy == null || contains(["spread", "partition", "cluster"], coalesce(var.placement_strategy, "-"))
    error_message = "placement_strategy must be spread, partition, cluster or null."
  }
}

variable "associate_public_ip_address" {
  description = "Give the hosts public IPv4 addresses. Default false: the operator reaches them over a VPN, Direct Connect or a bastion."
  type        = bool
  default     = false
}

variable "key_name" {
  description = "EC2 key pair whose public key is installed for ssh_user; null if keys are provisioned otherwise."
  type        = string
  default     = null
}

variable "ssh_user" {
  description = "The login user of the AMI (admin on Debian), reported in the hosts output for the inventory."
  type        = string
  default     = "admin"
}

variable "ssh_private_key_file" {
  description = "Path of the private key on the Ansible controller, reported in the hosts output for the inventory (never read by Terraform)."
  type        = string
  default     = null
}

variable "root_volume_size" {
  description = "Root volume size in GiB (the OS, kmirror's virtualenv and the journal; the mirror keeps no data on disk)."
  type        = number
  default     = 20

  validation {
    condition     = var.root_volume_size >= 8
    error_message = "root_volume_size must be at least 8 GiB."
  }
}

variable "root_volume_type" {
  description = "Root volume type."
  type        = string
  default     = "gp3"
}

variable "kms_key_id" {
  description = "KMS key ARN for the encrypted root volumes; null: the account's default EBS key (aws/ebs). Volumes are always encrypted."
  type        = string
  default     = null
}

variable "metadata_hop_limit" {
  description = "IMDSv2 PUT response hop limit (1: only the host itself, not containers behind a bridge, can reach the metadata service)."
  type        = number
  default     = 1

  validation {
    condition     = var.metadata_hop_limit >= 1 && var.metadata_hop_limit <= 64
    error_message = "metadata_hop_limit must be from 1 to 64."
  }
}

variable "disable_api_termination" {
  description = "Enable EC2 termination protection on the hosts."
  type        = bool
  default     = false
}

################################################################################
# Security group
################################################################################

variable "operator_cidr_blocks" {
  description = "CIDR blocks allowed to reach the hosts over SSH (the Ansible controller, a bastion or a VPN range). Nothing else may connect in. Public blocks must be /16 or narrower (IPv6: /48); wider ones only inside private space (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7)."
  type        = list(string)

  validation {
    condition     = length(var.operator_cidr_blocks) > 0 && alltrue([for c in var.operator_cidr_blocks : can(cidrhost(c, 0))])
    error_message = "operator_cidr_blocks must hold at least one valid CIDR block."
  }
  # By address range, not by spelling: 0.0.0.0/1 and 128.0.0.0/1 together are the whole internet too. A block
  # is accepted when it is narrow (IPv4 /16, IPv6 /48 or longer) or lies inside a private range: its network
  # address cut to the range's prefix is the range's own (cidrhost(..., 0) is a block's network address).
  validation {
    condition = alltrue([for c in var.operator_cidr_blocks : try(
      strcontains(c, ":")
      ? (tonumber(split("/", c)[1]) >= 48 || (tonumber(split("/", c)[1]) >= 7 && cidrhost("${cidrhost(c, 0)}/7", 0) == "fc00::"))
      : (tonumber(split("/", c)[1]) >= 16 || anytrue([for p in ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"] :
        tonumber(split("/", c)[1]) >= tonumber(split("/", p)[1]) && cidrhost("${cidrhost(c, 0)}/${split("/", p)[1]}", 0) == cidrhost(p, 0)
      ])),
    true)])
    error_message = "SSH must not be open to the internet: operator_cidr_blocks may hold public blocks of /16 or narrower (IPv6 /48), and wider ones only inside private space (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7)."
  }
}

variable "ssh_port" {
  description = "The SSH port opened to operator_cidr_blocks."
  type        = number
  default     = 22
}

variable "broker_egress" {
  description = <<-EOT
    What the mirror connects to: one entry per cluster (each source and the target), with name, the CIDR
    blocks of its brokers (IPv4 or IPv6) and their listener ports, e.g.
    [{ name = "east", cidr_blocks = ["10.20.0.0/24"], ports = [9093] }, { name = "target", ... }].
    Every (block, port) pair becomes one TCP egress rule; there is no other egress unless extra_egress
    adds it.
  EOT
  type = list(object({
    name        = string
    cidr_blocks = list(string)
    ports       = list(number)
  }))

  validation {
    condition     = length(var.broker_egress) >= 2
    error_message = "broker_egress needs the target cluster and at least one source cluster."
  }
  validation {
    condition     = length(distinct([for e in var.broker_egress : e.name])) == length(var.broker_egress) && alltrue([for e in var.broker_egress : can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", e.name))])
    error_message = "broker_egress names must be unique DNS labels."
  }
  validation {
    condition     = alltrue([for e in var.broker_egress : length(e.cidr_blocks) > 0 && alltrue([for c in e.cidr_blocks : can(cidrhost(c, 0)) && try(tonumber(split("/", c)[1]) >= (strcontains(c, ":") ? 16 : 8), false)])])
    error_message = "Every broker_egress entry needs valid CIDR blocks of at most a /8 (IPv6 /16): not the internet (0.0.0.0/0, ::/0, 0.0.0.0/1, ...)."
  }
  validation {
    condition     = alltrue([for e in var.broker_egress : length(e.ports) > 0 && alltrue([for p in e.ports : p >= 1 && p <= 65535 && floor(p) == p])])
    error_message = "Every broker_egress entry needs ports from 1 to 65535."
  }
}

variable "extra_egress" {
  description = <<-EOT
    Further egress the hosts need, each {description, cidr_blocks, protocol ("tcp" or "udp"), from_port,
    to_port}: e.g. Kerberos KDCs (88) for GSSAPI clusters, DNS resolvers or NTP servers outside the VPC, an
    internal package mirror. Not needed for the Amazon-provided DNS resolver, the Amazon Time Sync Service
    and the instance metadata service, which security groups do not filter.
  EOT
  type = list(object({
    description = string
    cidr_blocks = list(string)
    protocol    = optional(string, "tcp")
    from_port   = number
    to_port     = number
  }))
  default = []

  validation {
    condition     = alltrue([for e in var.extra_egress : contains(["tcp", "udp"], e.protocol) && e.from_port >= 0 && e.to_port <= 65535 && e.from_port <= e.to_port])
    error_message = "extra_egress entries need protocol tcp or udp and 0 <= from_port <= to_port <= 65535."
  }
  validation {
    condition     = alltrue([for e in var.extra_egress : length(e.cidr_blocks) > 0 && alltrue([for c in e.cidr_blocks : can(cidrhost(c, 0))])])
    error_message = "extra_egress entries need valid CIDR blocks."
  }
}

################################################################################
# IAM
################################################################################

variable "create_iam_instance_profile" {
  description = "Create an IAM role and instance profile for the hosts (no permissions unless iam_role_policies adds some). false: use iam_instance_profile_name."
  type        = bool
  default     = true
}

variable "iam_instance_profile_name" {
  description = "An existing instance profile, used when create_iam_instance_profile is false."
  type        = string
  default     = null
}

variable "iam_role_policies" {
  description = "Managed policy ARNs to attach to the created role, by a stable key, e.g. {ssm = \"arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore\"}."
  type        = map(string)
  default     = {}
}

variable "iam_role_permissions_boundary" {
  description = "Permissions boundary ARN for the created role."
  type        = string
  default     = null
}
