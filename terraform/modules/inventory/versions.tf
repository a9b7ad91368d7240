terraform {
  # 1.9: validation conditions that refer to other variables.
  required_version = ">= 1.9"
}
