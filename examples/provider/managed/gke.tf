# GKE: the endpoint and CA from the cluster resource, the access token of the
# credentials Terraform's Google provider uses.
data "google_client_config" "current" {}

provider "k8s" {
  alias                  = "gke"
  host                   = "https://${google_container_cluster.this.endpoint}"
  cluster_ca_certificate = base64decode(google_container_cluster.this.master_auth[0].cluster_ca_certificate)
  token                  = data.google_client_config.current.access_token
}

# Or, with the gke-gcloud-auth-plugin installed:
#   exec {
#     api_version = "client.authentication.k8s.io/v1beta1"
#     command     = "gke-gcloud-auth-plugin"
#   }
