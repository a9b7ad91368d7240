output "path" {
  description = "Where the inventory is written (the path given; depends on the file being written)."
  value       = var.path
  depends_on  = [terraform_data.this]
}
