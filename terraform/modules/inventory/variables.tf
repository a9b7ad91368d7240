################################################################################
# Hosts
################################################################################

variable "workers" {
  description = <<-EOT
    Hosts that run the mirror, in the target data centre (inventory group kmirror_workers). Each one:
    name (the inventory host name, a DNS label: a-z, 0-9 and '-'), address (what Ansible connects to:
    an IP address or a resolvable name), and optionally user, port, ssh_private_key_file (on the
    controller), ssh_common_args (extra ssh options, e.g. a known_hosts file) and vars (more host
    variables, strings only).
  EOT
  type = list(object({
    name                 = string
    address              = string
    user                 = optional(string)
    port                 = optional(number)
    ssh_private_key_file = optional(string)
    ssh_common_args      = optional(string)
    vars                 = optional(map(string), {})
  }))

  validation {
    condition     = length(var.workers) > 0
    error_message = "At least one worker host is needed: the mirror has to run somewhere."
  }
  validation {
    condition     = alltrue([for h in var.workers : can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", h.name))])
    error_message = "Worker names must be DNS labels: 1-63 characters of a-z, 0-9 and '-', not starting or ending with '-'."
  }
  validation {
    condition     = length(distinct([for h in var.workers : h.name])) == length(var.workers)
    error_message = "Worker names must be unique."
  }
  validation {
    condition     = alltrue([for h in var.workers : can(regex("^[^\\s,]+$", h.address))])
    error_message = "Every worker needs an address (an IP address or a host name, no spaces)."
  }
  validation {
    condition     = alltrue([for h in var.workers : h.port == null || try(h.port >= 1 && h.port <= 65535 && floor(h.port) == h.port, false)])
    error_message = "A worker's SSH port must be an integer from 1 to 65535."
  }
  validation {
    condition     = alltrue([for h in var.workers : alltrue([for k, v in h.vars : !can(regex(local.secret_key_regex, k)) || can(regex(local.vault_ref_re, v))])])
    error_message = "A worker's vars: a secret (a name with password, secret, jaas, credential, ...) may only be given as a reference to an Ansible Vault variable, \"{{ vault_name }}\": the inventory holds no secret."
  }
  validation {
    condition     = alltrue([for h in var.workers : alltrue([for k in keys(h.vars) : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k))])])
    error_message = "Host variable names (vars) must be valid Ansible variable names: letters, digits and '_', not starting with a digit."
  }
}

variable "audit_hosts" {
  description = <<-EOT
    Optional audit hosts (inventory group kmirror_audit), same shape as workers. Their names must be
    distinct from the workers' names.
  EOT
  type = list(object({
    name                 = string
    address              = string
    user                 = optional(string)
    port                 = optional(number)
    ssh_private_key_file = optional(string)
    ssh_common_args      = optional(string)
    vars                 = optional(map(string), {})
  }))
  default = []

  validation {
    condition     = alltrue([for h in var.audit_hosts : can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", h.name))])
    error_message = "Audit host names must be DNS labels: 1-63 characters of a-z, 0-9 and '-', not starting or ending with '-'."
  }
  validation {
    condition     = length(distinct(concat([for h in var.audit_hosts : h.name], [for h in var.workers : h.name]))) == length(var.audit_hosts) + length(var.workers)
    error_message = "Audit host names must be unique and distinct from the worker names."
  }
  validation {
    condition     = alltrue([for h in var.audit_hosts : can(regex("^[^\\s,]+$", h.address))])
    error_message = "Every audit host needs an address (an IP address or a host name, no spaces)."
  }
  validation {
    condition     = alltrue([for h in var.audit_hosts : h.port == null || try(h.port >= 1 && h.port <= 65535 && floor(h.port) == h.port, false)])
    error_message = "An audit host's SSH port must be an integer from 1 to 65535."
  }
  validation {
    condition     = alltrue([for h in var.audit_hosts : alltrue([for k, v in h.vars : !can(regex(local.secret_key_regex, k)) || can(regex(local.vault_ref_re, v))])])
    error_message = "An audit host's vars: a secret (a name with password, secret, jaas, credential, ...) may only be given as a reference to an Ansible Vault variable, \"{{ vault_name }}\": the inventory holds no secret."
  }
  validation {
    condition     = alltrue([for h in var.audit_hosts : alltrue([for k in keys(h.vars) : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k))])])
    error_message = "Host variable names (vars) must be valid Ansible variable names: letters, digits and '_', not starting with a digit."
  }
}

################################################################################
# Clusters
################################################################################

variable "target_cluster" {
  description = <<-EOT
    The target cluster every instance produces to (kmirror_target_cluster; the keys are those of
    inventory.example). name (a DNS label, default "target"), bootstrap_servers ("host:port,..."),
    security_protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), sasl_mechanism (GSSAPI,
    SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN; SASL_* only), sasl_username, kerberos_principal,
    kerberos_keytab_src, kerberos_service_name, tls {ca_src, cert_src, key_src, verify_hostname},
    acl_principal, acl_host, acl_topic_patterns, producer_properties (librdkafka/Java producer keys).
    Secrets never pass through Terraform: sasl_password_var, tls.key_password_var and
    acl_admin_properties_var name the Ansible variables (kept in Ansible Vault) that hold them; the
    inventory refers to them as "{{ name }}". With SCRAM or PLAIN the password variable defaults to
    <secret_variable_prefix><cluster name>_password.
  EOT
  type = object({
    name                  = optional(string, "target")
    bootstrap_servers     = string
    security_protocol     = optional(string, "PLAINTEXT")
    sasl_mechanism        = optional(string)
    sasl_username         = optional(string)
    sasl_password_var     = optional(string)
    kerberos_principal    = optional(string)
    kerberos_keytab_src   = optional(string)
    kerberos_service_name = optional(string)
    tls = optional(object({
      ca_src           = optional(string)
      cert_src         = optional(string)
      key_src          = optional(string)
      key_password_var = optional(string)
      verify_hostname  = optional(bool)
    }))
    acl_principal            = optional(string)
    acl_host                 = optional(string)
    acl_topic_patterns       = optional(list(object({ name = string, pattern_type = optional(string, "LITERAL") })))
    acl_admin_properties_var = optional(string)
    producer_properties      = optional(map(string), {})
  })

  # BEGIN generated: target_cluster checks (from roles/kmirror_config/files/cluster_definition.yml: make cluster-definition)
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", c.name)))])
    error_message = "target_cluster: names must be DNS labels (1-63 characters of a-z, 0-9 and '-'): each names a systemd instance and a directory."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (can(regex(local.cluster_bootstrap_servers_re, c.bootstrap_servers)))])
    error_message = "target_cluster: bootstrap_servers must be a comma-separated list of host:port."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (contains(local.cluster_security_protocols, c.security_protocol))])
    error_message = "target_cluster: security_protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (startswith(c.security_protocol, "SASL_") ? contains(local.cluster_sasl_mechanisms, coalesce(c.sasl_mechanism, "-")) : c.sasl_mechanism == null)])
    error_message = "target_cluster: SASL_PLAINTEXT and SASL_SSL need sasl_mechanism (GSSAPI, SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN); PLAINTEXT and SSL take none."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (c.sasl_mechanism != "GSSAPI" || (c.kerberos_principal != null && c.kerberos_keytab_src != null))])
    error_message = "target_cluster: GSSAPI needs kerberos_principal (the mirror's own principal) and kerberos_keytab_src (its keytab on the controller)."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (!contains(local.cluster_password_mechanisms, coalesce(c.sasl_mechanism, "-")) || c.sasl_username != null)])
    error_message = "target_cluster: SCRAM and PLAIN need sasl_username (the password stays in Ansible Vault, see sasl_password_var)."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (c.tls == null || endswith(c.security_protocol, "SSL"))])
    error_message = "target_cluster: tls is set but security_protocol is not SSL or SASL_SSL."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (c.tls == null || (try(c.tls.cert_src, null) == null) == (try(c.tls.key_src, null) == null))])
    error_message = "target_cluster.tls: mutual TLS needs both cert_src and key_src."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (try(c.tls.key_password_var, null) == null || try(c.tls.key_src, null) != null)])
    error_message = "target_cluster.tls: key_password_var needs key_src."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (alltrue([for v in [c.sasl_password_var, try(c.tls.key_password_var, null), c.acl_admin_properties_var] : v == null || can(regex("^[A-Za-z_][A-Za-z0-9_]*$", v))]))])
    error_message = "target_cluster: sasl_password_var, tls.key_password_var and acl_admin_properties_var must be Ansible variable names."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (alltrue([for k, v in try(c.producer_properties, c.consumer_properties) : !can(regex(local.secret_key_regex, k)) || can(regex(local.vault_ref_re, v))]))])
    error_message = "target_cluster.producer_properties: a secret (password, secret, ssl.key.pem, ...) may only be given as a reference to an Ansible Vault variable, \"{{ vault_name }}\"."
  }
  validation {
    condition     = alltrue([for c in [var.target_cluster] : (alltrue([for p in coalesce(c.acl_topic_patterns, []) : contains(["LITERAL", "PREFIXED"], p.pattern_type)]))])
    error_message = "target_cluster.acl_topic_patterns: pattern_type must be LITERAL or PREFIXED."
  }
  # END generated: target_cluster checks
}

variable "source_clusters" {
  description = <<-EOT
    The source clusters, one kmirror instance (kmirror@<name>.service) each on every worker
    (kmirror_source_clusters). name (a DNS label), bootstrap_servers, group_id (default
    "kmirror-<name>"; when replacing MirrorMaker give its group.id to resume from its offsets),
    whitelist and/or blacklist (Java regex lists, as MirrorMaker's --whitelist/--blacklist), and
    optionally num_streams, num_producers, queue_size, offset_commit_interval_ms,
    topic_refresh_interval_ms, stats_interval_ms, replication_factor, log_level, metrics_port (its
    Prometheus port; default 9570 + its position), consumer_properties,
    and the same security and ACL keys as target_cluster (secrets as Ansible variable names).
  EOT
  type = list(object({
    name                      = string
    bootstrap_servers         = string
    group_id                  = optional(string)
    whitelist                 = optional(string, "")
    blacklist                 = optional(string, "")
    num_streams               = optional(number)
    num_producers             = optional(number)
    queue_size                = optional(number)
    offset_commit_interval_ms = optional(number)
    topic_refresh_interval_ms = optional(number)
    stats_interval_ms         = optional(number)
    replication_factor        = optional(number)
    log_level                 = optional(string)
    metrics_port              = optional(number)
    security_protocol         = optional(string, "PLAINTEXT")
    sasl_mechanism            = optional(string)
    sasl_username             = optional(string)
    sasl_password_var         = optional(string)
    kerberos_principal        = optional(string)
    kerberos_keytab_src       = optional(string)
    kerberos_service_name     = optional(string)
    tls = optional(object({
      ca_src           = optional(string)
      cert_src         = optional(string)
      key_src          = optional(string)
      key_password_var = optional(string)
      verify_hostname  = optional(bool)
    }))
    acl_principal            = optional(string)
    acl_host                 = optional(string)
    acl_topic_patterns       = optional(list(object({ name = string, pattern_type = optional(string, "LITERAL") })))
    acl_admin_properties_var = optional(string)
    consumer_properties      = optional(map(string), {})
  }))

  validation {
    condition     = length(var.source_clusters) > 0
    error_message = "At least one source cluster is needed."
  }
  validation {
    condition     = length(distinct(concat([for s in var.source_clusters : s.name], [var.target_cluster.name]))) == length(var.source_clusters) + 1
    error_message = "Source cluster names must be unique and differ from the target cluster's name."
  }
  validation {
    condition     = alltrue([for s in var.source_clusters : s.group_id == null || can(regex("^\\S+$", s.group_id))])
    error_message = "A source cluster's group_id must not be empty or contain spaces."
  }
  validation {
    condition     = alltrue([for s in var.source_clusters : trimspace(s.whitelist) != "" || trimspace(s.blacklist) != ""])
    error_message = "Every source cluster needs a whitelist (e.g. \"orders.*,payments\"; \".*\" for every topic) or a blacklist."
  }
  validation {
    condition = alltrue(flatten([for s in var.source_clusters : [
      for n in [s.num_streams, s.num_producers, s.queue_size, s.offset_commit_interval_ms, s.topic_refresh_interval_ms, s.stats_interval_ms] :
      n == null || try(n >= 1 && floor(n) == n, false)
    ]]))
    error_message = "num_streams, num_producers, queue_size, offset_commit_interval_ms, topic_refresh_interval_ms and stats_interval_ms must be positive integers."
  }
  validation {
    condition     = alltrue([for s in var.source_clusters : s.replication_factor == null || try((s.replication_factor >= 1 || s.replication_factor == -1) && floor(s.replication_factor) == s.replication_factor, false)])
    error_message = "replication_factor must be a positive integer, or -1 for the target's default."
  }
  validation {
    condition     = alltrue([for s in var.source_clusters : s.log_level == null || contains(local.cluster_log_levels, s.log_level)])
    error_message = "log_level must be one of ${join(", ", local.cluster_log_levels)}."
  }
  # BEGIN generated: source_clusters checks (from roles/kmirror_config/files/cluster_definition.yml: make cluster-definition)
  validation {
    condition     = alltrue([for c in var.source_clusters : (can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", c.name)))])
    error_message = "source_clusters: names must be DNS labels (1-63 characters of a-z, 0-9 and '-'): each names a systemd instance and a directory."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (can(regex(local.cluster_bootstrap_servers_re, c.bootstrap_servers)))])
    error_message = "source_clusters: bootstrap_servers must be a comma-separated list of host:port."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (contains(local.cluster_security_protocols, c.security_protocol))])
    error_message = "source_clusters: security_protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (startswith(c.security_protocol, "SASL_") ? contains(local.cluster_sasl_mechanisms, coalesce(c.sasl_mechanism, "-")) : c.sasl_mechanism == null)])
    error_message = "source_clusters: SASL_PLAINTEXT and SASL_SSL need sasl_mechanism (GSSAPI, SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN); PLAINTEXT and SSL take none."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (c.sasl_mechanism != "GSSAPI" || (c.kerberos_principal != null && c.kerberos_keytab_src != null))])
    error_message = "source_clusters: GSSAPI needs kerberos_principal (the mirror's own principal) and kerberos_keytab_src (its keytab on the controller)."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (!contains(local.cluster_password_mechanisms, coalesce(c.sasl_mechanism, "-")) || c.sasl_username != null)])
    error_message = "source_clusters: SCRAM and PLAIN need sasl_username (the password stays in Ansible Vault, see sasl_password_var)."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (c.tls == null || endswith(c.security_protocol, "SSL"))])
    error_message = "source_clusters: tls is set but security_protocol is not SSL or SASL_SSL."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (c.tls == null || (try(c.tls.cert_src, null) == null) == (try(c.tls.key_src, null) == null))])
    error_message = "source_clusters.tls: mutual TLS needs both cert_src and key_src."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (try(c.tls.key_password_var, null) == null || try(c.tls.key_src, null) != null)])
    error_message = "source_clusters.tls: key_password_var needs key_src."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (alltrue([for v in [c.sasl_password_var, try(c.tls.key_password_var, null), c.acl_admin_properties_var] : v == null || can(regex("^[A-Za-z_][A-Za-z0-9_]*$", v))]))])
    error_message = "source_clusters: sasl_password_var, tls.key_password_var and acl_admin_properties_var must be Ansible variable names."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (alltrue([for k, v in try(c.producer_properties, c.consumer_properties) : !can(regex(local.secret_key_regex, k)) || can(regex(local.vault_ref_re, v))]))])
    error_message = "source_clusters.consumer_properties: a secret (password, secret, ssl.key.pem, ...) may only be given as a reference to an Ansible Vault variable, \"{{ vault_name }}\"."
  }
  validation {
    condition     = alltrue([for c in var.source_clusters : (alltrue([for p in coalesce(c.acl_topic_patterns, []) : contains(["LITERAL", "PREFIXED"], p.pattern_type)]))])
    error_message = "source_clusters.acl_topic_patterns: pattern_type must be LITERAL or PREFIXED."
  }
  # END generated: source_clusters checks
}

################################################################################
# Other variables
################################################################################

variable "secret_variable_prefix" {
  description = "Prefix of the default Ansible Vault variable names the inventory refers to, e.g. vault_kmirror_east_password for a SCRAM or PLAIN source cluster named east ('-' in names becomes '_')."
  type        = string
  default     = "vault_kmirror_"

  validation {
    condition     = can(regex("^[A-Za-z_][A-Za-z0-9_]*$", var.secret_variable_prefix))
    error_message = "secret_variable_prefix must start an Ansible variable name: letters, digits and '_', not starting with a digit."
  }
}

variable "all_vars" {
  description = "More variables for the group all (e.g. {kmirror_sysctl_apply_live = false}); any Terraform value that YAML can hold. They must not hold secrets (a secret-named key at any depth takes only a \"{{ vault_name }}\" reference), nor redefine kmirror_target_cluster or kmirror_source_clusters."
  type        = any
  default     = {}

  validation {
    condition     = can(keys(var.all_vars))
    error_message = "all_vars must be a map or an object."
  }
  validation {
    condition     = !contains(try(keys(var.all_vars), []), "kmirror_target_cluster") && !contains(try(keys(var.all_vars), []), "kmirror_source_clusters")
    error_message = "all_vars must not set kmirror_target_cluster or kmirror_source_clusters: use target_cluster and source_clusters."
  }
  validation {
    condition     = alltrue([for k in try(keys(var.all_vars), []) : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k))])
    error_message = "all_vars keys must be valid Ansible variable names."
  }
  # At any depth: every "key": value member of all_vars' JSON text (maps nested in maps and lists too).
  validation {
    condition = alltrue([for m in regexall(local.json_member_re, jsonencode(var.all_vars)) :
      !can(regex(local.secret_key_regex, jsondecode("\"${m[0]}\""))) || (startswith(m[1], "\"") && can(regex(local.vault_ref_re, jsondecode(m[1]))))
    ])
    error_message = "all_vars: a secret (a key, at any depth, with password, secret, token, _pw, jaas, credential, ...: the rule of kmirror.config.secrets) may only be given as a reference to an Ansible Vault variable, \"{{ vault_name }}\": the inventory holds no secret."
  }
}

variable "header" {
  description = "Comment lines put at the top of the generated YAML (each prefixed with '# '). A line listing the Vault variables to define follows when there are any."
  type        = list(string)
  default     = ["Generated by Terraform (terraform/modules/inventory): edit the Terraform variables, not this file."]

  validation {
    condition     = alltrue([for line in var.header : !can(regex("[\r\n]", line))])
    error_message = "header lines must not hold line breaks: each is one comment line of the YAML (a line break would add YAML of its own)."
  }
}
