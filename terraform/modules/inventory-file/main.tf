# The generated inventory written to a file, for `ansible-playbook -i <path>`: one resource for every
# environment. terraform_data and local-exec are built in, so no provider (local_file) is needed offline.
# The file is replaced atomically when the path or the text changes and removed on destroy.

resource "terraform_data" "this" {
  input            = { path = var.path }
  triggers_replace = { path = var.path, content = sha256(var.content) }

  provisioner "local-exec" {
    command     = "mkdir -p \"$(dirname \"$INVENTORY_PATH\")\" && printf '%s' \"$INVENTORY\" > \"$INVENTORY_PATH.tmp\" && mv \"$INVENTORY_PATH.tmp\" \"$INVENTORY_PATH\""
    environment = { INVENTORY = var.content, INVENTORY_PATH = var.path }
  }

  provisioner "local-exec" {
    when        = destroy
    command     = "rm -f \"$INVENTORY_PATH\""
    environment = { INVENTORY_PATH = self.input.path }
  }
}
