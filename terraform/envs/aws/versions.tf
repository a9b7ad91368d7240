terraform {
  required_version = ">= 1.9"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # Exactly this release (docs/security.md, Supply chain). No .terraform.lock.hcl is committed: the
      # registry is out of reach where this was written, so no provider hashes could be recorded. The first
      # `terraform providers lock` on a machine that reaches it writes one (docs/terraform.md): commit it.
      version = "= 5.100.0"
    }
  }

  # Keep the state where the team shares it, with locking, e.g.:
  # backend "s3" {
  #   bucket       = "example-terraform-state"
  #   key          = "kmirror/prod/terraform.tfstate"
  #   region       = "eu-west-1"
  #   use_lockfile = true
  #   encrypt      = true
  # }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = var.tags
  }
}
