output "inventory_path" {
  description = "The generated inventory: ansible-playbook -i <this> playbooks/site.yml."
  value       = local.inventory_path
}

output "inventory_yaml" {
  description = "The generated inventory's text."
  value       = module.inventory.inventory_yaml
}

output "secret_variables" {
  description = "Ansible Vault variables the inventory refers to: define them (ansible-vault) before running the playbook."
  value       = module.inventory.secret_variables
}

output "hosts" {
  description = "The mirror hosts: [{name, address, user, ssh_private_key_file}]."
  value       = module.hosts.hosts
}

output "availability_zones" {
  description = "Availability zone by host name."
  value       = module.hosts.availability_zones
}

output "security_group_id" {
  description = "The hosts' security group: allow it on the brokers' security groups where they live in AWS."
  value       = module.hosts.security_group_id
}
