package kube

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// benchService is the i-th Service of a bench fleet, as the endpointslice
// controller and the API server write it: its slice of 10 endpoints with
// uids, resourceVersions and managedFields.
func benchService(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	name := fmt.Sprintf("fleet-%05d", i)
	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "bench-scale-00", Name: name, Labels: labels, UID: "0b7d3a52-1c8e-4f7a-9d2e-5a6b7c8d9e0f",
			ResourceVersion: "123456", Generation: 1,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: "Update", APIVersion: "discovery.k8s.io/v1"}}}
	}
	svc := &corev1.Service{ObjectMeta: meta(name, nil), Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.1.1", ClusterIPs: []string{"10.96.1.1"}, Type: corev1.ServiceTypeClusterIP,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
	}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: meta(name+"-abcde", map[string]string{discoveryv1.LabelServiceName: name,
		discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}}
	for e := range 10 {
		k := i*10 + e
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 20+k/62500, k/250%250, k%250+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To("node-a"), Zone: ptr.To("zone-a"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "bench-scale-00", Name: fmt.Sprintf("%s-%d", name, e),
				UID: "4c1f2a3b-5d6e-7f80-91a2-b3c4d5e6f708", ResourceVersion: "123457"},
		})
	}
	return svc, slice
}

// heapAfterGC is the bytes of live heap after a collection (two: the
// first moves what sync.Pools hold to their victim caches, the second frees
// them).
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCacheHeldBytesPerService: what the cache holds for one Service
// and its slice of 10 endpoints, with its keys and indexes (packed; the
// same with three labels on the Service, as a fleet selected by labels
// has them), and the typed objects alone, managedFields dropped (what an
// informer held before, without its keys and indexes).
func BenchmarkCacheHeldBytesPerService(b *testing.B) {
	const n = 5000
	for _, kind := range []string{"packed", "packed-labelled", "typed"} {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				before := heapAfterGC()
				var held any
				objs := make([]any, 0, 2*n)
				for i := range n {
					svc, slice := benchService(i)
					svc.ManagedFields, slice.ManagedFields = nil, nil
					if kind == "packed-labelled" {
						svc.Labels = map[string]string{"app.kubernetes.io/name": svc.Name, "team": "payments", "lb": "haproxy"}
					}
					objs = append(objs, svc, slice)
				}
				if kind == "typed" {
					held = objs
				} else {
					k, err := CacheOf(CacheScope{Namespaces: []string{""}}, objs...)
					if err != nil {
						b.Fatal(err)
					}
					held = k
					clear(objs)
				}
				after := heapAfterGC()
				b.ReportMetric(float64(after-before)/n, "bytes/service")
				runtime.KeepAlive(held)
			}
		})
	}
}
