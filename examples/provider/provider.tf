terraform {
  required_providers {
    k8s = {
      source = "vigie/k8s"
    }
  }
}

# With no arguments the provider reads $KUBECONFIG, else ~/.kube/config, else
# the service account of the pod Terraform runs in.
provider "k8s" {}

# Or name the file and the context.
provider "k8s" {
  alias      = "prod"
  kubeconfig = "~/.kube/prod.yaml"
  context    = "prod-eu-west-1"
}
