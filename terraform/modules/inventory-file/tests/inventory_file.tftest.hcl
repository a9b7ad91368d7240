# terraform test: the inventory file is written (a real apply: the local-exec provisioner runs and the test
# reads the file back), rewritten when its text changes, and bad input is refused.

variables {
  path    = "/tmp/kmirror-tftest-inventory-file/sub/inventory.yml"
  content = "all:\n  children:\n    kmirror_workers:\n      hosts: {}\n"
}

run "writes_the_file" {
  command = apply

  assert {
    condition     = output.path == var.path && terraform_data.this.output.path == var.path
    error_message = "The output is the path written."
  }
  assert {
    condition     = file(var.path) == var.content
    error_message = "The file holds exactly the inventory's text (its directory created)."
  }
}

run "new_text_replaces_the_file" {
  command = apply

  variables {
    content = "all:\n  children: {}\n"
  }

  assert {
    condition     = file(var.path) == "all:\n  children: {}\n"
    error_message = "A changed inventory is written again."
  }
  assert {
    condition     = terraform_data.this.triggers_replace.content == sha256("all:\n  children: {}\n")
    error_message = "The text's hash is a replace trigger."
  }
}

run "destroy_finds_the_path" {
  command = plan

  assert {
    condition     = terraform_data.this.input.path == var.path
    error_message = "The destroy-time provisioner finds the path in input."
  }
}

run "refuses_a_relative_path" {
  command = plan

  variables {
    path = "inventory.yml"
  }

  expect_failures = [var.path]
}

run "refuses_empty_content" {
  command = plan

  variables {
    content = " \n"
  }

  expect_failures = [var.content]
}
