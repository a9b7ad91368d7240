# terraform test for the local environment: plans only (an apply starts real guests: tests/terraform
# does that). Checks the guests it would start and the inventory it would write, and bad input.

variables {
  bootstrap_servers = { east = "10.213.0.1:9100", target = "10.213.0.1:9101", west = "10.213.0.1:9102" }
  sources           = { west = { whitelist = "clicks.*", blacklist = "clicks\\.private" } }
  state_dir         = "/run/kmirror-hosts-tftest"
  inventory_path    = "/tmp/kmirror-tftest/inventory.yml"
}

run "plans_guests_and_their_inventory" {
  command = plan

  assert {
    condition     = keys(terraform_data.guest) == ["kml-w1", "kml-w2"]
    error_message = "Two worker guests by default, named <name_prefix>-w<N>."
  }
  assert {
    condition     = terraform_data.guest["kml-w1"].input.index == 101 && terraform_data.guest["kml-w2"].input.index == 102
    error_message = "Guests take the indices from first_index (101) on."
  }
  assert {
    condition     = terraform_data.guest["kml-w2"].input.state_dir == "/run/kmirror-hosts-tftest" && endswith(terraform_data.guest["kml-w2"].input.hosts_py, "/tools/hosts.py")
    error_message = "The destroy-time provisioner finds hosts.py and the state dir in input."
  }
  assert {
    condition = yamldecode(output.inventory_yaml).all.children.kmirror_workers.hosts["kml-w1"] == {
      ansible_host                 = "10.213.101.2"
      ansible_user                 = "root"
      ansible_ssh_private_key_file = "/var/cache/kmirror-hosts/id_ed25519"
      ansible_ssh_common_args      = "-o UserKnownHostsFile=/tmp/kmirror-tftest/known_hosts.d/kml-w1 -o StrictHostKeyChecking=yes"
    }
    error_message = "A worker's host variables: address 10.213.INDEX.2, root, the hosts.py key, its pinned host key."
  }
  assert {
    condition = [for s in yamldecode(output.inventory_yaml).all.vars.kmirror_source_clusters : [s.name, s.bootstrap_servers, s.whitelist]] == [
      ["east", "10.213.0.1:9100", ".*"], ["west", "10.213.0.1:9102", "clicks.*"]
    ]
    error_message = "Every non-target entry of bootstrap_servers is a source; sources without settings mirror every topic."
  }
  assert {
    condition     = yamldecode(output.inventory_yaml).all.vars.kmirror_source_clusters[1].blacklist == "clicks\\.private"
    error_message = "Per-source settings are applied."
  }
  assert {
    condition     = yamldecode(output.inventory_yaml).all.vars.kmirror_target_cluster.bootstrap_servers == "10.213.0.1:9101"
    error_message = "The target entry becomes kmirror_target_cluster."
  }
  assert {
    condition     = yamldecode(output.inventory_yaml).all.vars.kmirror_sysctl_apply_live == false
    error_message = "The guests' /proc/sys is read-only: kmirror_sysctl_apply_live is false."
  }
  assert {
    condition     = output.inventory_path == "/tmp/kmirror-tftest/inventory.yml" && module.inventory_file.path == output.inventory_path
    error_message = "The inventory is written to inventory_path."
  }
}

run "audit_hosts_follow_the_workers" {
  command = plan

  variables {
    worker_count     = 1
    audit_host_count = 1
    first_index      = 105
  }

  assert {
    condition     = terraform_data.guest["kml-w1"].input.index == 105 && terraform_data.guest["kml-a1"].input.index == 106
    error_message = "Audit guests take the indices after the workers."
  }
  assert {
    condition     = keys(yamldecode(output.inventory_yaml).all.children.kmirror_audit.hosts) == ["kml-a1"]
    error_message = "Audit guests are in kmirror_audit."
  }
}

run "refuses_clusters_without_a_target" {
  command = plan
  variables { bootstrap_servers = { east = "10.213.0.1:9100" } }
  expect_failures = [var.bootstrap_servers]
}

run "refuses_settings_for_an_unknown_source" {
  command = plan
  variables { sources = { north = {} } }
  expect_failures = [var.sources]
}

run "refuses_no_workers" {
  command = plan
  variables { worker_count = 0 }
  expect_failures = [var.worker_count]
}

run "refuses_indices_past_254" {
  command = plan
  variables { first_index = 254 }
  expect_failures = [var.first_index]
}

run "refuses_a_relative_state_dir" {
  command = plan
  variables { state_dir = "state" }
  expect_failures = [var.state_dir]
}

run "refuses_too_many_audit_hosts" {
  command = plan
  variables { audit_host_count = 10 }
  expect_failures = [var.audit_host_count]
}

run "refuses_a_name_prefix_that_is_no_dns_label" {
  command = plan
  variables { name_prefix = "KM_L" }
  expect_failures = [var.name_prefix]
}

run "refuses_a_relative_cache_dir" {
  command = plan
  variables { cache_dir = "cache" }
  expect_failures = [var.cache_dir]
}

run "refuses_a_zero_boot_timeout" {
  command = plan
  variables { boot_timeout = 0 }
  expect_failures = [var.boot_timeout]
}
