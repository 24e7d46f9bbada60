# The services variable of every Consul-Terraform-Sync (CTS) module, its type
# copied verbatim from CTS's documented module input
# (consul-terraform-sync, examples/runnable-example/example-module/variables.tf).
# provider::k8s::cts_services gives a value of exactly this type.
variable "services" {
  description = "Consul services monitored by Consul-Terraform-Sync"
  type = map(
    object({
      id        = string
      name      = string
      kind      = string
      address   = string
      port      = number
      meta      = map(string)
      tags      = list(string)
      namespace = string
      status    = string

      node                  = string
      node_id               = string
      node_address          = string
      node_datacenter       = string
      node_tagged_addresses = map(string)
      node_meta             = map(string)

      cts_user_defined_meta = map(string)
    })
  )
}

variable "backend_name" {
  description = "Name of the HAProxy backend"
  type        = string
  default     = "pool"
}
