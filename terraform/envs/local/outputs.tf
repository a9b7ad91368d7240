output "inventory_path" {
  description = "The generated inventory file: ansible-playbook -i <this> playbooks/site.yml (from the repository root)."
  value       = local.inventory_path
}

output "inventory_yaml" {
  description = "The generated inventory's text (the same as the file)."
  value       = module.inventory.inventory_yaml
}

output "hosts" {
  description = "The guests: name => {index, address, known_hosts (its pinned SSH host key file)}."
  value       = { for name, g in local.guests : name => { index = g.index, address = g.address, known_hosts = g.known_hosts } }
}

output "ssh_private_key_file" {
  description = "The private key the guests accept for root (made by `hosts.py rootfs`)."
  value       = local.identity_file
}

output "ansible_command" {
  description = "The command that deploys kmirror onto the guests, run from the repository root."
  value       = "ansible-playbook -i ${local.inventory_path} playbooks/site.yml"
}
