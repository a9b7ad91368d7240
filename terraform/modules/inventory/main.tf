# Turns hosts and cluster definitions into the Ansible inventory that playbooks/site.yml expects
# (groups kmirror_workers and kmirror_audit; kmirror_target_cluster and kmirror_source_clusters in
# the vars of all). Pure: built-in functions only, no resources, no providers.

locals {
  vault_ref_re = "^\\{\\{\\s*([A-Za-z_][A-Za-z0-9_]*)\\s*\\}\\}$"
  # One "key": value member of a JSON text (jsonencode): the key's JSON string content, then the value's
  # first token: a whole JSON string, "{" or "[" (the members inside are matched next), or a scalar.
  # Matches end only at a real key's closing quote (a quote inside a string is always escaped).
  json_member_re = "\"((?:[^\"\\\\]|\\\\.)*)\":(\"(?:[^\"\\\\]|\\\\.)*\"|[{\\[]|[^,\\]}{\\[\"]+)"

  ##############################################################################
  # Hosts: inventory host name => host variables
  ##############################################################################

  host_vars = { for h in concat(var.workers, var.audit_hosts) : h.name => merge(
    { for k, v in {
      ansible_host                 = h.address
      ansible_user                 = h.user
      ansible_port                 = h.port
      ansible_ssh_private_key_file = h.ssh_private_key_file
      ansible_ssh_common_args      = h.ssh_common_args
    } : k => v if v != null },
    h.vars,
  ) }

  ##############################################################################
  # Connection security of every cluster (same keys for the target and the sources)
  ##############################################################################

  security_keys = [
    "security_protocol", "sasl_mechanism", "sasl_username", "sasl_password_var", "kerberos_principal",
    "kerberos_keytab_src", "kerberos_service_name", "tls", "acl_principal", "acl_host", "acl_topic_patterns",
    "acl_admin_properties_var",
  ]
  security_in = concat(
    [for c in [var.target_cluster] : merge(
      { for k in local.security_keys : k => c[k] },
      { name = c.name, properties = c.producer_properties },
    )],
    [for c in var.source_clusters : merge(
      { for k in local.security_keys : k => c[k] },
      { name = c.name, properties = c.consumer_properties },
    )],
  )

  # The Ansible variables (in Vault) that hold each cluster's secrets; null where there is none.
  secret_refs = { for c in local.security_in : c.name => {
    sasl_password        = (startswith(c.security_protocol, "SASL_") && contains(local.cluster_password_mechanisms, coalesce(c.sasl_mechanism, "-")) ? coalesce(c.sasl_password_var, "${var.secret_variable_prefix}${replace(c.name, "-", "_")}_password") : null)
    key_password         = try(c.tls.key_password_var, null)
    acl_admin_properties = c.acl_admin_properties_var
    properties           = [for v in values(c.properties) : regex(local.vault_ref_re, v)[0] if can(regex(local.vault_ref_re, v))]
  } }

  security = { for c in local.security_in : c.name => { for k, v in {
    security_protocol     = c.security_protocol
    sasl_mechanism        = c.sasl_mechanism
    sasl_username         = c.sasl_username
    sasl_password         = local.secret_refs[c.name].sasl_password == null ? null : "{{ ${local.secret_refs[c.name].sasl_password} }}"
    kerberos_principal    = c.kerberos_principal
    kerberos_keytab_src   = c.kerberos_keytab_src
    kerberos_service_name = c.kerberos_service_name
    tls = c.tls == null ? null : { for tk, tv in {
      ca_src          = c.tls.ca_src
      cert_src        = c.tls.cert_src
      key_src         = c.tls.key_src
      key_password    = c.tls.key_password_var == null ? null : "{{ ${c.tls.key_password_var} }}"
      verify_hostname = c.tls.verify_hostname
    } : tk => tv if tv != null }
    acl_principal        = c.acl_principal
    acl_host             = c.acl_host
    acl_topic_patterns   = c.acl_topic_patterns
    acl_admin_properties = c.acl_admin_properties_var == null ? null : "{{ ${c.acl_admin_properties_var} }}"
  } : k => v if v != null } }

  ##############################################################################
  # Cluster definitions, as the roles read them (inventory.example)
  ##############################################################################

  target_cluster = merge(
    {
      name              = var.target_cluster.name
      bootstrap_servers = replace(var.target_cluster.bootstrap_servers, " ", "")
    },
    local.security[var.target_cluster.name],
    { for k, v in { producer_properties = var.target_cluster.producer_properties } : k => v if length(v) > 0 },
  )

  source_clusters = [for s in var.source_clusters : merge(
    { for k, v in {
      name                      = s.name
      bootstrap_servers         = replace(s.bootstrap_servers, " ", "")
      group_id                  = coalesce(s.group_id, "kmirror-${s.name}")
      whitelist                 = s.whitelist
      blacklist                 = s.blacklist
      num_streams               = s.num_streams
      num_producers             = s.num_producers
      queue_size                = s.queue_size
      offset_commit_interval_ms = s.offset_commit_interval_ms
      topic_refresh_interval_ms = s.topic_refresh_interval_ms
      stats_interval_ms         = s.stats_interval_ms
      replication_factor        = s.replication_factor
      log_level                 = s.log_level
      metrics_port              = s.metrics_port
    } : k => v if v != null && v != "" },
    local.security[s.name],
    { for k, v in { consumer_properties = s.consumer_properties } : k => v if length(v) > 0 },
  )]

  ##############################################################################
  # The inventory
  ##############################################################################

  inventory = {
    all = {
      children = {
        kmirror_workers = { hosts = { for h in var.workers : h.name => local.host_vars[h.name] } }
        kmirror_audit   = { hosts = { for h in var.audit_hosts : h.name => local.host_vars[h.name] } }
      }
      vars = merge(var.all_vars, {
        kmirror_target_cluster  = local.target_cluster
        kmirror_source_clusters = local.source_clusters
      })
    }
  }

  secret_variables = sort(distinct(compact(flatten([
    for name, r in local.secret_refs : concat([r.sasl_password, r.key_password, r.acl_admin_properties], r.properties)
  ]))))

  header_lines = concat(var.header, length(local.secret_variables) == 0 ? [] : [
    "Secrets are references to Ansible Vault variables; define: ${join(", ", local.secret_variables)}",
  ])
  inventory_yaml = "${join("", [for line in local.header_lines : "# ${line}\n"])}${yamlencode(local.inventory)}"
}
