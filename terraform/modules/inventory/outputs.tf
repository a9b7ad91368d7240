output "inventory_yaml" {
  description = "The Ansible inventory as YAML text, for `ansible-playbook -i <file> playbooks/site.yml`. Holds no secret: every input that could carry one (secret-named properties such as sasl.jaas.config or ssl.key.password, host vars, all_vars) is refused unless it is a \"{{ vault_... }}\" reference (see secret_variables), by the rule of kmirror.config.secrets."
  value       = local.inventory_yaml
}

output "inventory" {
  description = "The same inventory as a Terraform object (all.children.kmirror_workers.hosts, all.children.kmirror_audit.hosts, all.vars), e.g. for `terraform output -json`. Sensitive: shown as (sensitive value) by plan and apply, like anything built from it; a root output of it needs sensitive = true."
  value       = local.inventory
  sensitive   = true
}

output "worker_names" {
  description = "Inventory names of the worker hosts (group kmirror_workers), in the order given."
  value       = tolist([for h in var.workers : h.name])
}

output "audit_host_names" {
  description = "Inventory names of the audit hosts (group kmirror_audit), in the order given."
  value       = tolist([for h in var.audit_hosts : h.name])
}

output "secret_variables" {
  description = "Names of the Ansible variables the inventory refers to for secrets (SASL passwords, TLS key passwords, ACL admin settings, secret properties): define each one in an Ansible Vault file, e.g. group_vars/all/vault.yml next to the inventory."
  value       = local.secret_variables
}
