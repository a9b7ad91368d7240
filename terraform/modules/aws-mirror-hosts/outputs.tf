output "hosts" {
  description = "The instances as the inventory module's workers input expects them: [{name, address (private IPv4), user, ssh_private_key_file}], in order."
  value = [for i in range(length(local.instances)) : {
    name                 = "${var.name}-${i + 1}"
    address              = aws_instance.this["${var.name}-${i + 1}"].private_ip
    user                 = var.ssh_user
    ssh_private_key_file = var.ssh_private_key_file
  }]
}

output "instance_ids" {
  description = "Instance ID by host name."
  value       = { for name, i in aws_instance.this : name => i.id }
}

output "private_ips" {
  description = "Private IPv4 address by host name."
  value       = { for name, i in aws_instance.this : name => i.private_ip }
}

output "availability_zones" {
  description = "Availability zone by host name (the spread over zones)."
  value       = { for name, i in aws_instance.this : name => i.availability_zone }
}

output "security_group_id" {
  description = "ID of the hosts' security group (e.g. to allow it on the brokers' security groups)."
  value       = try(aws_security_group.this[0].id, null)
}

output "iam_role_arn" {
  description = "ARN of the hosts' IAM role, when the module created it."
  value       = try(aws_iam_role.this[0].arn, null)
}

output "iam_instance_profile_name" {
  description = "Name of the instance profile the hosts use."
  value       = local.instance_profile_name
}

output "ami_id" {
  description = "The AMI the hosts were created from."
  value       = local.ami_id
}
