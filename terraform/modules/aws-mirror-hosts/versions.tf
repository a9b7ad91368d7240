terraform {
  # 1.9: validation conditions that refer to other variables.
  required_version = ">= 1.9"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # aws_vpc_security_group_{ingress,egress}_rule, metadata_options.http_tokens, root_block_device.tags:
      # the 5.x line it is written for; the root module pins the release (envs/aws/versions.tf).
      version = ">= 5.0, < 6.0"
    }
  }
}
