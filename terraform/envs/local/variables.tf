variable "bootstrap_servers" {
  description = <<-EOT
    The clusters, name => "host:port", as `python -m kmirror.testing.embedded up --state-dir DIR --host 10.213.0.1
    NAME...` writes them to DIR/clusters.json (pass it as -var "bootstrap_servers=$(cat DIR/clusters.json)").
    The entry named target_cluster_name is the target; every other entry is a source cluster. The guests
    reach the controller at 10.213.0.1 only, so the brokers must listen there.
  EOT
  type        = map(string)

  validation {
    condition     = contains(keys(var.bootstrap_servers), var.target_cluster_name) && length(var.bootstrap_servers) >= 2
    error_message = "bootstrap_servers needs the target cluster (target_cluster_name) and at least one source cluster."
  }
  validation {
    condition     = alltrue([for v in values(var.bootstrap_servers) : can(regex("^[A-Za-z0-9_.-]+:[0-9]{1,5}(,[A-Za-z0-9_.-]+:[0-9]{1,5})*$", v))])
    error_message = "Every bootstrap_servers value must be host:port[,host:port...]."
  }
}

variable "target_cluster_name" {
  description = "Which entry of bootstrap_servers is the target cluster."
  type        = string
  default     = "target"
}

variable "sources" {
  description = <<-EOT
    Settings per source cluster, keyed by its name in bootstrap_servers: whitelist (default ".*", every
    topic), blacklist, group_id (default kmirror-<name>), num_streams (default 1), offset_commit_interval_ms
    and consumer_properties (default session.timeout.ms=6000: the embedded test broker holds a JoinGroup
    for half the session timeout). Sources without an entry get the defaults.
  EOT
  type = map(object({
    whitelist                 = optional(string, ".*")
    blacklist                 = optional(string, "")
    group_id                  = optional(string)
    num_streams               = optional(number, 1)
    offset_commit_interval_ms = optional(number)
    consumer_properties       = optional(map(string), { "session.timeout.ms" = "6000" })
  }))
  default = {}

  validation {
    condition     = alltrue([for k in keys(var.sources) : contains(keys(var.bootstrap_servers), k) && k != var.target_cluster_name])
    error_message = "Every key of sources must be a source cluster named in bootstrap_servers."
  }
}

variable "worker_count" {
  description = "How many worker guests (group kmirror_workers) to start."
  type        = number
  default     = 2

  validation {
    condition     = var.worker_count >= 1 && var.worker_count <= 9 && floor(var.worker_count) == var.worker_count
    error_message = "worker_count must be an integer from 1 to 9."
  }
}

variable "audit_host_count" {
  description = "How many audit guests (group kmirror_audit) to start after the workers."
  type        = number
  default     = 0

  validation {
    condition     = var.audit_host_count >= 0 && var.audit_host_count <= 9 && floor(var.audit_host_count) == var.audit_host_count
    error_message = "audit_host_count must be an integer from 0 to 9."
  }
}

variable "first_index" {
  description = "hosts.py index of the first guest (address 10.213.INDEX.2); the others follow. 101-119 is kept for this environment: molecule scenarios use 11-30 and tests/hosts 201-202."
  type        = number
  default     = 101

  validation {
    condition     = var.first_index >= 1 && floor(var.first_index) == var.first_index && var.first_index + var.worker_count + var.audit_host_count - 1 <= 254
    error_message = "Guest indices must be integers from 1 to 254 (first_index + worker_count + audit_host_count - 1 <= 254)."
  }
}

variable "name_prefix" {
  description = "Guest and inventory host names are <name_prefix>-w<N> (workers) and <name_prefix>-a<N> (audit hosts)."
  type        = string
  default     = "kml"

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,50}[a-z0-9])?$", var.name_prefix))
    error_message = "name_prefix must be a DNS label of at most 52 characters (a-z, 0-9, '-')."
  }
}

variable "hosts_py" {
  description = "The project's host tool (tools/hosts.py); null: the one in this repository."
  type        = string
  default     = null
}

variable "python" {
  description = "Python 3.11+ that runs hosts.py (stdlib only)."
  type        = string
  default     = "python3"
}

variable "state_dir" {
  description = "hosts.py --state-dir: runtime state of the guests."
  type        = string
  default     = "/run/kmirror-hosts"

  validation {
    condition     = startswith(var.state_dir, "/")
    error_message = "state_dir must be an absolute path."
  }
}

variable "cache_dir" {
  description = "hosts.py --cache-dir: the cached guest root filesystem and the SSH key the guests accept (<cache_dir>/id_ed25519)."
  type        = string
  default     = "/var/cache/kmirror-hosts"

  validation {
    condition     = startswith(var.cache_dir, "/")
    error_message = "cache_dir must be an absolute path."
  }
}

variable "boot_timeout" {
  description = "Seconds hosts.py waits for a guest's sshd and systemd."
  type        = number
  default     = 90

  validation {
    condition     = var.boot_timeout >= 1
    error_message = "boot_timeout must be at least 1 second."
  }
}

variable "inventory_path" {
  description = "Where the generated inventory is written; null: inventory.yml in the root module's directory. Per-guest known_hosts files go to <its directory>/known_hosts.d/."
  type        = string
  default     = null
}

variable "all_vars" {
  description = "More variables for the group all, over this environment's defaults ({kmirror_sysctl_apply_live = false}: /proc/sys is read-only in the guests)."
  type        = any
  default     = {}
}
