# Local environment: systemd-nspawn guests on this machine, made by tools/hosts.py through
# terraform_data resources (built in: no provider to download), and the Ansible inventory for them.
#   terraform apply  -> guests up, inventory written;  terraform destroy -> guests removed.

locals {
  hosts_py        = abspath(coalesce(var.hosts_py, "${path.module}/../../../tools/hosts.py"))
  inventory_path  = abspath(coalesce(var.inventory_path, "${path.root}/inventory.yml"))
  known_hosts_dir = "${dirname(local.inventory_path)}/known_hosts.d"
  identity_file   = "${var.cache_dir}/id_ed25519"

  workers = [for i in range(var.worker_count) : {
    name = "${var.name_prefix}-w${i + 1}", index = var.first_index + i
  }]
  audit_hosts = [for i in range(var.audit_host_count) : {
    name = "${var.name_prefix}-a${i + 1}", index = var.first_index + var.worker_count + i
  }]
  # hosts.py puts guest INDEX at 10.213.INDEX.2 (its documented addressing).
  guests = { for g in concat(local.workers, local.audit_hosts) : g.name => merge(g, {
    address     = "10.213.${g.index}.2"
    known_hosts = "${local.known_hosts_dir}/${g.name}"
  }) }

  inventory_hosts = { for name, g in local.guests : name => {
    name                 = name
    address              = g.address
    user                 = "root"
    ssh_private_key_file = local.identity_file
    # The key that ssh-keyscan read right after the guest booted, over its own veth link.
    ssh_common_args = "-o UserKnownHostsFile=${g.known_hosts} -o StrictHostKeyChecking=yes"
  } }

  source_names = sort([for name in keys(var.bootstrap_servers) : name if name != var.target_cluster_name])
  source_settings = { for name in local.source_names : name => lookup(var.sources, name, {
    whitelist           = ".*", blacklist = "", group_id = null, num_streams = 1, offset_commit_interval_ms = null,
    consumer_properties = { "session.timeout.ms" = "6000" }
  }) }
}

# Controller packages and the cached guest root filesystem (the first build takes about a minute).
resource "terraform_data" "controller" {
  triggers_replace = { python = var.python, hosts_py = local.hosts_py, cache_dir = var.cache_dir }

  provisioner "local-exec" {
    command = "\"$PYTHON\" \"$HOSTS_PY\" prereqs --cache-dir \"$CACHE_DIR\" && \"$PYTHON\" \"$HOSTS_PY\" rootfs --cache-dir \"$CACHE_DIR\""
    environment = {
      PYTHON    = var.python
      HOSTS_PY  = local.hosts_py
      CACHE_DIR = var.cache_dir
    }
  }
}

resource "terraform_data" "guest" {
  for_each = local.guests

  # Everything the destroy-time provisioner needs is in input (it may only use self).
  input = {
    name        = each.key
    index       = each.value.index
    address     = each.value.address
    known_hosts = each.value.known_hosts
    python      = var.python
    hosts_py    = local.hosts_py
    state_dir   = var.state_dir
    cache_dir   = var.cache_dir
  }
  triggers_replace = {
    name      = each.key
    index     = each.value.index
    state_dir = var.state_dir
    cache_dir = var.cache_dir
  }
  depends_on = [terraform_data.controller]

  provisioner "local-exec" {
    # Start the guest, then record its host key; if that fails, remove the guest again.
    command = <<-EOT
      set -eu
      "$PYTHON" "$HOSTS_PY" up --name "$NAME" --index "$INDEX" --state-dir "$STATE_DIR" --cache-dir "$CACHE_DIR" --timeout "$BOOT_TIMEOUT"
      if ! { mkdir -p "$(dirname "$KNOWN_HOSTS")" \
             && ssh-keyscan -T 10 -t ed25519 "$ADDRESS" > "$KNOWN_HOSTS.tmp" 2>/dev/null \
             && test -s "$KNOWN_HOSTS.tmp" && mv "$KNOWN_HOSTS.tmp" "$KNOWN_HOSTS"; }; then
        echo "could not read the SSH host key of $NAME ($ADDRESS); removing the guest" >&2
        "$PYTHON" "$HOSTS_PY" down --name "$NAME" --state-dir "$STATE_DIR" --cache-dir "$CACHE_DIR" || true
        exit 1
      fi
    EOT
    environment = {
      PYTHON       = var.python
      HOSTS_PY     = local.hosts_py
      NAME         = each.key
      INDEX        = tostring(each.value.index)
      ADDRESS      = each.value.address
      KNOWN_HOSTS  = each.value.known_hosts
      STATE_DIR    = var.state_dir
      CACHE_DIR    = var.cache_dir
      BOOT_TIMEOUT = tostring(var.boot_timeout)
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$PYTHON\" \"$HOSTS_PY\" down --name \"$NAME\" --state-dir \"$STATE_DIR\" --cache-dir \"$CACHE_DIR\" && rm -f \"$KNOWN_HOSTS\" \"$KNOWN_HOSTS.tmp\""
    environment = {
      PYTHON      = self.input.python
      HOSTS_PY    = self.input.hosts_py
      NAME        = self.input.name
      STATE_DIR   = self.input.state_dir
      CACHE_DIR   = self.input.cache_dir
      KNOWN_HOSTS = self.input.known_hosts
    }
  }
}

module "inventory" {
  source = "../../modules/inventory"

  workers     = [for g in local.workers : local.inventory_hosts[g.name]]
  audit_hosts = [for g in local.audit_hosts : local.inventory_hosts[g.name]]
  target_cluster = {
    name              = var.target_cluster_name
    bootstrap_servers = var.bootstrap_servers[var.target_cluster_name]
  }
  source_clusters = [for name in local.source_names : {
    name                      = name
    bootstrap_servers         = var.bootstrap_servers[name]
    whitelist                 = local.source_settings[name].whitelist
    blacklist                 = local.source_settings[name].blacklist
    group_id                  = local.source_settings[name].group_id
    num_streams               = local.source_settings[name].num_streams
    offset_commit_interval_ms = local.source_settings[name].offset_commit_interval_ms
    consumer_properties       = local.source_settings[name].consumer_properties
  }]
  all_vars = merge({ kmirror_sysctl_apply_live = false }, var.all_vars)
  header = [
    "Generated by Terraform (terraform/envs/local): local systemd-nspawn guests; `terraform destroy` removes them.",
    "Use: ansible-playbook -i ${local.inventory_path} playbooks/site.yml",
  ]
}

# The inventory file (modules/inventory-file: built-in terraform_data, no provider needed).
module "inventory_file" {
  source = "../../modules/inventory-file"

  path    = local.inventory_path
  content = module.inventory.inventory_yaml

  # Written once the guests are up.
  depends_on = [terraform_data.guest]
}

# The file's resource moved into modules/inventory-file: existing states keep it instead of rewriting it.
moved {
  from = terraform_data.inventory_file
  to   = module.inventory_file.terraform_data.this
}
