# EKS: the endpoint and CA from the cluster resource, a token from the AWS CLI
# each time the provider starts (tokens last 15 minutes).
provider "k8s" {
  alias                  = "eks"
  host                   = aws_eks_cluster.this.endpoint
  cluster_ca_certificate = base64decode(aws_eks_cluster.this.certificate_authority[0].data)

  exec {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", aws_eks_cluster.this.name]
  }
}

data "k8s_ready_endpoints" "web" {
  provider  = k8s.eks
  namespace = "shop"
  service   = "web"

  # On the first apply the cluster does not exist while planning: read the
  # endpoints during apply, once it does.
  depends_on = [aws_eks_cluster.this]
}
