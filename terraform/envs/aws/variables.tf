variable "region" {
  description = "The target data centre: the AWS region the mirror hosts run in (next to the target cluster)."
  type        = string
}

variable "name" {
  description = "Name of this mirror deployment (instances <name>-1, <name>-2, ...)."
  type        = string
  default     = "kmirror"
}

variable "tags" {
  description = "Tags for every resource (provider default_tags)."
  type        = map(string)
  default     = { Service = "kmirror" }
}

variable "vpc_id" {
  description = "VPC of the target region the hosts run in."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets, one per availability zone: the hosts are spread over them."
  type        = list(string)
}

variable "instance_count" {
  description = "How many mirror hosts."
  type        = number
  default     = 2
}

variable "instance_type" {
  description = "EC2 instance type of the hosts."
  type        = string
  default     = "m6i.large"
}

variable "key_name" {
  description = "EC2 key pair installed for the login user."
  type        = string
  default     = null
}

variable "ssh_private_key_file" {
  description = "The matching private key on the Ansible controller (written into the inventory as a path)."
  type        = string
  default     = null
}

variable "operator_cidr_blocks" {
  description = "Networks allowed to SSH into the hosts (the Ansible controller, a bastion, a VPN)."
  type        = list(string)
}

variable "target_cluster" {
  description = "The target cluster, as the inventory module's target_cluster (name, bootstrap_servers, security_protocol, ...; secrets only as Ansible Vault variable names)."
  type        = any
}

variable "source_clusters" {
  description = "The source clusters, as the inventory module's source_clusters."
  type        = any
}

variable "broker_cidr_blocks" {
  description = "CIDR blocks of each cluster's brokers, by cluster name (the target's and every source's). The ports are taken from the clusters' bootstrap_servers; list further listener ports in extra_broker_ports."
  type        = map(list(string))

  validation {
    condition = alltrue([for n in concat([try(var.target_cluster.name, "target")], try([for s in var.source_clusters : s.name], [])) :
    contains(keys(var.broker_cidr_blocks), n)])
    error_message = "broker_cidr_blocks needs an entry for the target cluster and for every source cluster, by name."
  }
}

variable "extra_broker_ports" {
  description = "Further broker ports by cluster name, when brokers advertise listeners on other ports than those in bootstrap_servers."
  type        = map(list(number))
  default     = {}

  validation {
    condition     = alltrue([for n in keys(var.extra_broker_ports) : contains(keys(var.broker_cidr_blocks), n)])
    error_message = "extra_broker_ports: every key must be a cluster named in broker_cidr_blocks."
  }
}

variable "extra_egress" {
  description = "Further egress rules for the hosts (see the aws-mirror-hosts module), e.g. Kerberos KDCs on port 88."
  type = list(object({
    description = string
    cidr_blocks = list(string)
    protocol    = optional(string, "tcp")
    from_port   = number
    to_port     = number
  }))
  default = []
}

variable "inventory_path" {
  description = "Where the generated Ansible inventory is written; null: inventory.yml next to this configuration."
  type        = string
  default     = null
}
