package kube

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func labelledSlice(service string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-abc",
		Labels: map[string]string{discoveryv1.LabelServiceName: service}}}
}

// An update that moves a slice to another Service is a change of the old
// one too (its endpoints go), as the endpointslice controller queues both.
func TestASliceRelabelledForAnotherServiceChangesTheOldOne(t *testing.T) {
	was, ok := relabelled(labelledSlice("web"), labelledSlice("other"))
	if !ok || was.Kind != "EndpointSlice" || was.Namespace != "shop" || was.Service != "web" || was.Name != "web-abc" {
		t.Errorf("change %+v (%v), want one of web's slice", was, ok)
	}
	if _, ok := relabelled(labelledSlice("web"), labelledSlice("web")); ok {
		t.Error("an update that keeps the Service is a change of another")
	}
}
