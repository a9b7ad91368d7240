terraform {
  # 1.9: validation conditions that refer to other variables. terraform_data (built in) needs 1.4.
  required_version = ">= 1.9"

  # State stays on this machine (terraform.tfstate here, or -backend-config=path=... at init):
  # the guests it describes exist only on this machine.
  backend "local" {}
}
