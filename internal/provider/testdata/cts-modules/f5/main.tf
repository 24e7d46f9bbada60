variable "services" {
  type = map(object({
    id                    = string
    name                  = string
    address               = string
    port                  = number
    status                = string
    meta                  = map(string)
    tags                  = list(string)
    namespace             = string
    node                  = string
    node_id               = string
    node_address          = string
    node_datacenter       = string
    node_tagged_addresses = map(string)
    node_meta             = map(string)
  }))
}

locals {
  with_virtual_server = [
    for s in values(var.services) : s
    if lookup(s.meta, "VSIP", "") != "" && lookup(s.meta, "VSPORT", "") != ""
  ]
  names = distinct([for s in local.with_virtual_server : s.name])
}

output "pools" {
  value = {
    for name in local.names : "${name}-pool" => {
      addresses = distinct([for s in local.with_virtual_server : s.node_address if s.name == name])
      port      = [for s in local.with_virtual_server : s.port if s.name == name][0]
    }
  }
}
