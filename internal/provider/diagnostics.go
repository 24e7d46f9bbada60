package provider

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// Each diagnostic says what was attempted, then after a blank line the likely
// cause and the remedy, then the error itself, which starts with the text the
// documentation promises ("get service NS/NAME: ...").

const roleHint = "The identity needs, in the Service's namespace, a Role with `get` on `services` and `list` on " +
	"`endpointslices` in API group `discovery.k8s.io`, bound to it by a RoleBinding (see the provider documentation)."

func getServiceDiagnostic(namespace, service string, err error) diag.Diagnostic {
	attempted := fmt.Sprintf("The provider could not read Service %s/%s.", namespace, service)
	switch {
	case apierrors.IsNotFound(err):
		return diag.NewErrorDiagnostic("Service Not Found", attempted+"\n\n"+
			fmt.Sprintf("The Service doesn't exist in namespace %s. Check service and namespace, or create the Service before reading it.", namespace)+
			"\n\n"+err.Error())
	case apierrors.IsForbidden(err):
		return diag.NewErrorDiagnostic("Permission Denied Reading Service", attempted+"\n\n"+
			"The identity of the provider may not get this Service: the Role is missing or does not allow `get` on `services`. "+
			roleHint+"\n\n"+err.Error())
	default:
		return diag.NewErrorDiagnostic("Unable to Read Service", attempted+"\n\n"+transportRemedy(err)+"\n\n"+err.Error())
	}
}

func listEndpointSlicesDiagnostic(namespace, service string, err error) diag.Diagnostic {
	attempted := fmt.Sprintf("The provider read Service %s/%s but could not list its EndpointSlices.", namespace, service)
	if apierrors.IsForbidden(err) {
		return diag.NewErrorDiagnostic("Permission Denied Listing EndpointSlices", attempted+"\n\n"+
			"The identity may get the Service but not list EndpointSlices: the second rule of the Role, `list` on "+
			"`endpointslices` in API group `discovery.k8s.io`, is missing. "+roleHint+"\n\n"+err.Error())
	}
	return diag.NewErrorDiagnostic("Unable to List EndpointSlices", attempted+"\n\n"+transportRemedy(err)+"\n\n"+err.Error())
}

func watchDiagnostic(r poolRequest, err error) diag.Diagnostic {
	attempted := fmt.Sprintf("The provider waited for min_ready endpoints of Service %s/%s by watching its EndpointSlices, "+
		"and the watch failed.", r.Namespace, r.Service)
	remedy := transportRemedy(err)
	if apierrors.IsForbidden(err) {
		remedy = "Waiting needs `watch` on `endpointslices` in API group `discovery.k8s.io`, beside `list`: add it to " +
			"the Role, or remove the timeouts block so the read does not wait."
	}
	return diag.NewErrorDiagnostic("Unable to Watch EndpointSlices", attempted+"\n\n"+remedy+"\n\n"+err.Error())
}

func tooFewDiagnostic(r poolRequest, ready, draining int, waited bool) diag.Diagnostic {
	attempted := fmt.Sprintf("Service %s/%s has too few ready endpoints: found %d, asked for %d (min_ready).",
		r.Namespace, r.Service, ready, r.MinReady) + drainingText(draining) + waitedText(waited, r.wait)
	return diag.NewAttributeErrorDiagnostic(path.Root("min_ready"), "Too Few Ready Endpoints", attempted+"\n\n"+
		"The read stopped so that the apply does not shrink or empty the load balancer pool. Check the pods of the "+
		"Service (kubectl get endpointslices -l kubernetes.io/service-name="+r.Service+" -n "+r.Namespace+"), then "+
		"apply again; give timeouts.read to wait for a rollout, or lower min_ready.")
}

const clusterRoleHint = "For a fleet, the identity needs `list` on `services` and on `endpointslices` in API group " +
	"`discovery.k8s.io`: in each namespace read, a Role bound by a RoleBinding; with all_namespaces, a ClusterRole bound " +
	"by a ClusterRoleBinding (see the k8s_services documentation)."

func listServicesDiagnostic(namespace string, err error) diag.Diagnostic {
	attempted := fmt.Sprintf("The provider could not list the Services in %s.", kube.Scope(namespace))
	if apierrors.IsForbidden(err) {
		return diag.NewErrorDiagnostic("Permission Denied Listing Services", attempted+"\n\n"+
			"The identity of the provider may not list Services there: the rule with `list` on `services` is missing. "+
			clusterRoleHint+"\n\n"+err.Error())
	}
	return diag.NewErrorDiagnostic("Unable to List Services", attempted+"\n\n"+transportRemedy(err)+"\n\n"+err.Error())
}

func listServiceSlicesDiagnostic(namespace string, err error) diag.Diagnostic {
	attempted := fmt.Sprintf("The provider listed the Services in %s but could not list their EndpointSlices.", kube.Scope(namespace))
	if apierrors.IsForbidden(err) {
		return diag.NewErrorDiagnostic("Permission Denied Listing EndpointSlices", attempted+"\n\n"+
			"The identity may list Services but not EndpointSlices: the rule with `list` on `endpointslices` in API "+
			"group `discovery.k8s.io` is missing. "+clusterRoleHint+"\n\n"+err.Error())
	}
	return diag.NewErrorDiagnostic("Unable to List EndpointSlices", attempted+"\n\n"+transportRemedy(err)+"\n\n"+err.Error())
}

func fleetWatchDiagnostic(err error) diag.Diagnostic {
	attempted := "The provider waited for min_ready and min_services by watching the EndpointSlices of the " +
		"namespaces read, and the watch failed."
	remedy := transportRemedy(err)
	if apierrors.IsForbidden(err) {
		remedy = "Waiting needs `watch` on `endpointslices` in API group `discovery.k8s.io`, beside `list`: add it to " +
			"the Role (or ClusterRole), or remove the timeouts block so the read does not wait."
	}
	return diag.NewErrorDiagnostic("Unable to Watch EndpointSlices", attempted+"\n\n"+remedy+"\n\n"+err.Error())
}

// drainingText says that the draining endpoints in a pool were not counted.
func drainingText(draining int) string {
	if draining == 0 {
		return ""
	}
	return fmt.Sprintf(" The pool also has %d draining endpoint(s) (terminating_endpoints), which take no new "+
		"connections and are not counted.", draining)
}

func waitedText(waited bool, wait time.Duration) string {
	if waited {
		return fmt.Sprintf(" The provider waited %s (timeouts.read) for more.", wait)
	}
	return " Without a timeouts { read = ... } block the read does not wait."
}

func tooFewServicesDiagnostic(r fleetRequest, found int, waited bool) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root("min_services"), "Too Few Services",
		fmt.Sprintf("The selection has %d Service(s) with a pool, fewer than min_services = %d.", found, r.MinServices)+
			waitedText(waited, r.wait)+"\n\n"+
			"The read stopped so that a selector or namespace that matches too little does not empty the pools. "+
			"Check namespace, namespaces, label_selector and names (and skipped, for Services without port_name), "+
			"then apply again; or lower min_services.")
}

func tooFewInPoolsDiagnostic(r fleetRequest, short []endpoints.ServicePool, waited bool) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root("min_ready"), "Too Few Ready Endpoints",
		fmt.Sprintf("%d Service(s) have fewer than min_ready = %d ready endpoint(s): %s.", len(short), r.MinReady, describeShort(short))+
			" Draining endpoints (terminating_endpoints) take no new connections and are not counted."+
			waitedText(waited, r.wait)+"\n\n"+
			"The read stopped so that the apply does not shrink or empty those load balancer pools. Check the pods "+
			"of those Services, then apply again; give timeouts.read to wait for a rollout, or lower min_ready.")
}

// nodesRuleHint is the rule target = "nodes" adds to the Role of the
// identity; Nodes are cluster-scoped, so no Role can grant it.
const nodesRuleHint = "With target = \"nodes\" the identity also needs `list` on `nodes` (API group \"\"), which " +
	"only a ClusterRole can grant, since Nodes belong to no namespace: a ClusterRole with that one rule, bound to " +
	"the identity by a ClusterRoleBinding (see the k8s_ready_endpoints documentation, \"Pods or nodes?\"). Or use " +
	"target = \"pods\" if the load balancer reaches pod IPs."

func listNodesDiagnostic(err error) diag.Diagnostic {
	attempted := "The provider could not list the Nodes, for target = \"nodes\"."
	if apierrors.IsForbidden(err) {
		return diag.NewAttributeErrorDiagnostic(path.Root("target"), "Permission Denied Listing Nodes", attempted+"\n\n"+
			"The identity of the provider may not list Nodes: the ClusterRole rule with `list` on `nodes` is "+
			"missing. "+nodesRuleHint+"\n\n"+err.Error())
	}
	return diag.NewErrorDiagnostic("Unable to List Nodes", attempted+"\n\n"+transportRemedy(err)+"\n\n"+err.Error())
}

func listPodsDiagnostic(namespace string, err error) diag.Diagnostic {
	attempted := fmt.Sprintf("The provider could not list the Pods in %s, for pod_health_checks or readiness_gate.", kube.Scope(namespace))
	if apierrors.IsForbidden(err) {
		return diag.NewErrorDiagnostic("Permission Denied Listing Pods", attempted+"\n\n"+
			"The identity of the provider may not list Pods there: pod_health_checks and readiness_gate need a rule with "+
			"`list` on `pods` (API group \"\") beside the one on Services and EndpointSlices, in a Role of the namespace "+
			"or a ClusterRole. Add it, or remove pod_health_checks and readiness_gate.\n\n"+err.Error())
	}
	return diag.NewErrorDiagnostic("Unable to List Pods", attempted+"\n\n"+transportRemedy(err)+"\n\n"+err.Error())
}

func noNodePortDiagnostic(noPort *endpoints.NoNodePortError) diag.Diagnostic {
	if noPort.Port == 0 && noPort.PortName == "" {
		return diag.NewAttributeErrorDiagnostic(path.Root("port_name"), "No Port Chosen For Nodes",
			fmt.Sprintf("The provider looked for the nodePort of Service %s/%s, for target = \"nodes\", and the Service has %d ports.\n\n",
				noPort.Namespace, noPort.Service, noPort.Ports)+
				"A node pool gives one nodePort: set port_name to the name of the port the load balancer sends to.\n\n"+
				noPort.Error())
	}
	return diag.NewAttributeErrorDiagnostic(path.Root("target"), "Service Port Without NodePort",
		fmt.Sprintf("The provider looked for the nodePort of port %s of Service %s/%s, for target = \"nodes\", and it has none: the Service is of type %s.\n\n",
			portLabel(noPort), noPort.Namespace, noPort.Service, noPort.Type)+
			"A node pool sends traffic to the nodes on the port's nodePort, which only NodePort and LoadBalancer "+
			"Services have (a LoadBalancer Service with allocateLoadBalancerNodePorts: false has none). Make the "+
			"Service of type NodePort or LoadBalancer, or use target = \"pods\" if the load balancer reaches pod IPs.\n\n"+
			noPort.Error())
}

func portLabel(e *endpoints.NoNodePortError) string {
	if e.PortName != "" {
		return fmt.Sprintf("%q", e.PortName)
	}
	return fmt.Sprintf("%d (unnamed)", e.Port)
}

// expiryWarnings are the rules' warnings about slices whose expiry
// annotation could not be read.
func expiryWarnings(warnings []string) diag.Diagnostics {
	var diags diag.Diagnostics
	for _, w := range warnings {
		diags.AddWarning("Unreadable Expiry Annotation", w)
	}
	return diags
}

// leftOutNamed is how many left-out slices a warning names; it counts
// the others, so that a fleet of thousands of Services gives one warning
// of a few lines.
const leftOutNamed = 10

// leftOutWarning says, in one warning for a read, which EndpointSlices the
// pools of Services with a selector left out (by pool: "namespace/name" of
// the Service, its slices) and how to count them; none when none was.
func leftOutWarning(services []string, leftOut [][]endpoints.LeftOutSlice) diag.Diagnostics {
	var named []string
	total, of := 0, 0
	for i, slices := range leftOut {
		if len(slices) > 0 {
			of++
		}
		for _, s := range slices {
			total++
			if len(named) < leftOutNamed {
				manager := "no managed-by label"
				if s.Manager != "" {
					manager = fmt.Sprintf("managed by %q", s.Manager)
				}
				named = append(named, fmt.Sprintf("%s/%s of Service %s (%s)", s.Namespace, s.Name, services[i], manager))
			}
		}
	}
	if total == 0 {
		return nil
	}
	list := strings.Join(named, "\n  ")
	if total > len(named) {
		list += fmt.Sprintf("\n  and %d more", total-len(named))
	}
	return diag.Diagnostics{diag.NewWarningDiagnostic("EndpointSlices Left Out",
		fmt.Sprintf("%d EndpointSlice(s) labelled for %d Service(s) with a selector are not from the EndpointSlice controller "+
			"(endpointslice.kubernetes.io/managed-by = %s) nor from a trusted manager; their endpoints are left out of the pools:\n  %s\n\n"+
			"Anyone who may write an EndpointSlice labelled with a Service's name could otherwise put any address in its pool. "+
			"If a manager's slices belong in the pools (a service mesh, a multi-cluster controller), add it to "+
			"trusted_slice_managers, of the data source or of the provider.",
			total, of, endpoints.EndpointSliceController, list))}
}

func rulesDiagnostic(err error) diag.Diagnostic {
	var noNodePort *endpoints.NoNodePortError
	if errors.As(err, &noNodePort) {
		return noNodePortDiagnostic(noNodePort)
	}
	var notFound *endpoints.PortNotFoundError
	if errors.As(err, &notFound) {
		ports := "no named port"
		if len(notFound.Available) > 0 {
			ports = "ports named " + strings.Join(quoteAll(notFound.Available), ", ")
		}
		return diag.NewAttributeErrorDiagnostic(path.Root("port_name"), "Port Not Found",
			fmt.Sprintf("The provider looked for port %q among the ports of Service %s/%s.\n\n", notFound.PortName, notFound.Namespace, notFound.Service)+
				fmt.Sprintf("The Service has %s. Set port_name to one of them, or leave it unset for a Service with a single port.\n\n", ports)+
				err.Error())
	}
	return diag.NewErrorDiagnostic("Unable to Compute Ready Endpoints", err.Error())
}

func transportRemedy(err error) string {
	var timeout *kube.TimeoutError
	switch {
	case errors.As(err, &timeout):
		return "The API server did not answer in time. Check that it is up and reachable from where Terraform runs, " +
			"and not overloaded."
	case isTLSVerificationError(err):
		return "The API server's TLS certificate was not accepted: it is not signed by the CA the provider trusts " +
			"(cluster_ca_certificate, or the certificate-authority of the kubeconfig), or it does not name the host " +
			"connected to. Check that the CA belongs to this cluster, or set tls_server_name when the API server " +
			"is reached under another name."
	case apierrors.IsUnauthorized(err):
		return "The API server did not accept the credentials of the kubeconfig: the token or certificate may have " +
			"expired or belong to another cluster. Refresh them and try again."
	default:
		return "The cluster could not be reached or refused the request. Check the server address and the " +
			"credentials of the kubeconfig context, and that the API server is reachable from where Terraform runs."
	}
}

func notConfiguredDiagnostic() diag.Diagnostic {
	return diag.NewErrorDiagnostic("Provider Configuration Not Known",
		"The k8s provider has no cluster to read yet: some of its arguments (host, credentials, kubeconfig...) "+
			"come from a resource that is not created, so they are unknown while planning. The provider does not "+
			"contact any cluster until they are known.\n\n"+
			"Add depends_on = [<that resource>] to this data source, so that Terraform reads it during apply, once "+
			"the cluster exists; or apply in two steps: first the cluster (terraform apply -target=<that resource>), "+
			"then the rest.")
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

func isTLSVerificationError(err error) bool {
	var verification *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verification) || errors.As(err, &unknownAuthority) ||
		errors.As(err, &hostname) || errors.As(err, &invalid)
}

// configurationDiagnostic is a configuration that could not be made: from a
// variable, the kubeconfig lookup, or the arguments with host.
func configurationDiagnostic(cfg providerModel, inline bool, err error) diag.Diagnostic {
	var envErr *kube.EnvError
	switch {
	case errors.As(err, &envErr):
		return variableDiagnostic(envErr.Name, err)
	case inline:
		return invalidCredentialsDiagnostic(err)
	default:
		return loadDiagnostic(cfg, err)
	}
}

func variableDiagnostic(name string, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid Environment Variable",
		"The provider read its connection, in part or whole, from the environment variables of the "+
			"hashicorp/kubernetes provider, and "+name+" cannot be used.\n\n"+
			"Fix or unset "+name+", or set in the provider block the argument it stands for, which wins over it (the "+
			"provider documentation says which variable stands for which argument, and when each is read).\n\n"+err.Error())
}

func loadDiagnostic(cfg providerModel, err error) diag.Diagnostic {
	const summary = "Unable to Load Kubeconfig"
	attempted, cause := "The provider found no usable cluster configuration.", err
	var loadErr *kube.LoadError
	contextFromVariable := false
	if errors.As(err, &loadErr) {
		cause = loadErr.Err
		attempted = "The provider found no usable cluster configuration. It looked at:\n  - " +
			strings.Join(loadErr.Tried, "\n  - ")
		if loadErr.Context != "" {
			attempted += "\nfor context " + strconv.Quote(loadErr.Context)
			if loadErr.ContextFrom != "" {
				attempted += " (from " + loadErr.ContextFrom + ")"
				contextFromVariable = true
			}
			attempted += "."
		}
		if len(loadErr.Unread) > 0 {
			attempted += "\nThese variables are set but were not read, for the rule of the provider documentation: " +
				strings.Join(loadErr.Unread, ", ") + "."
		}
	}
	detail := attempted + "\n\n" +
		"Set kubeconfig to a readable kubeconfig file (or KUBE_CONFIG_PATH or $KUBECONFIG, or create ~/.kube/config), " +
		"and context (or KUBE_CTX) to one of its contexts, or give the connection with host and credentials. The " +
		"provider looks, in order, at the kubeconfig argument, KUBE_CONFIG_PATH, KUBE_CONFIG_PATHS, KUBE_HOST, the " +
		"files of $KUBECONFIG, ~/.kube/config and the service account of the pod it runs in; it never falls back to " +
		"localhost.\n\n" +
		cause.Error()
	var unknownContext *kube.UnknownContextError
	switch {
	case errors.As(err, &unknownContext) && !contextFromVariable:
		return diag.NewAttributeErrorDiagnostic(path.Root("context"), summary, detail)
	case cfg.Kubeconfig.ValueString() != "":
		return diag.NewAttributeErrorDiagnostic(path.Root("kubeconfig"), summary, detail)
	default:
		return diag.NewErrorDiagnostic(summary, detail)
	}
}

func invalidCredentialsDiagnostic(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid Provider Credentials",
		"The provider could not use the connection given by its arguments.\n\n"+
			"Check host, the PEM certificates and keys, proxy_url and the exec block.\n\n"+err.Error())
}

func clientDiagnostic(source string, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Unable to Create Kubernetes Client",
		"The provider loaded its configuration from "+source+" but could not build a client from it.\n\n"+
			"Check the certificates and credentials of that configuration.\n\n"+err.Error())
}

func unexpectedProviderDataDiagnostic(providerData any) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Unexpected Provider Data",
		fmt.Sprintf("Expected *provider.providerData, got %T. This is a bug in the provider; please report it.", providerData))
}

// stateBugDiagnostic reports a state the provider could not build or encode.
func stateBugDiagnostic(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Unable to Build State",
		"Building the state of the read failed. This is a bug in the provider; please report it.\n\n"+err.Error())
}
