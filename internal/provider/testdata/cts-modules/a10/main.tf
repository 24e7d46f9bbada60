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

output "service_groups" {
  value = {
    for name in distinct([for s in values(var.services) : s.name]) : name => [
      for s in values(var.services) : { name = s.address, host = s.address, port = s.port } if s.name == name
    ]
  }
}
