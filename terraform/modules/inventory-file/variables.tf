variable "path" {
  description = "Absolute path of the inventory file to write (its directory is created)."
  type        = string

  validation {
    condition     = startswith(var.path, "/")
    error_message = "path must be absolute (the caller's abspath(...)): the destroy-time provisioner runs from wherever terraform runs."
  }
}

variable "content" {
  description = "The inventory's text (module.inventory.inventory_yaml)."
  type        = string

  validation {
    condition     = trimspace(var.content) != ""
    error_message = "content is empty: pass module.inventory.inventory_yaml."
  }
}
