terraform {
  # terraform_data (built in, no provider) needs 1.4; the environments that call this need 1.9.
  required_version = ">= 1.9"
}
