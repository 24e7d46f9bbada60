package kube

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// fullPod is a pod with what an API server gives besides what a health
// check reads: status, volumes, annotations, managed fields, env.
func fullPod(name string, labels map[string]string, containers ...corev1.Container) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels, ResourceVersion: "17", UID: "u-" + "1",
			Annotations:     map[string]string{"a": "b"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)}},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "rs"}}},
		Spec: corev1.PodSpec{Containers: containers, NodeName: "node-a",
			Volumes: []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To(int32(420))}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// gatedFullPod is a fullPod being deleted, with two readiness gates and
// conditions whose times and messages the trimming drops.
func gatedFullPod(containers ...corev1.Container) corev1.Pod {
	p := fullPod("gated", map[string]string{"app": "web"}, containers...)
	p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0).Local()}
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "k8s.example/pool-web"}, {ConditionType: "k8s.example/other"}}
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(1700000000, 0)},
		{Type: "k8s.example/other", Status: corev1.ConditionTrue, Reason: "Registered", Message: "in the pool"},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse},
	}
	return p
}

func TestAProtobufPageOfPodsDecodesToWhatTrimPodKeeps(t *testing.T) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTPS}},
		PeriodSeconds: 5}
	serving := corev1.Container{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "admin", ContainerPort: 9090}},
		ReadinessProbe: probe, Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, VolumeMounts: []corev1.VolumeMount{{Name: "token", MountPath: "/var/run"}}}
	sidecar := corev1.Container{Name: "proxy", Image: "envoy", ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(15000)}}}}
	for _, tt := range []struct {
		name string
		list corev1.PodList
	}{
		{"pods of one and two containers, labelled or not", corev1.PodList{
			ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next", RemainingItemCount: ptr.To(int64(3))},
			Items: []corev1.Pod{
				fullPod("web-1", map[string]string{"app": "web", "pod-template-hash": "abc"}, serving, sidecar),
				fullPod("web-2", nil, sidecar),
				fullPod("bare", map[string]string{"app": "web"}),
			}}},
		{"a terminating pod with readiness gates and conditions", corev1.PodList{
			ListMeta: metav1.ListMeta{ResourceVersion: "44"},
			Items:    []corev1.Pod{gatedFullPod(sidecar)}}},
		{"an empty page", corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "43"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var body bytes.Buffer
			encoder := codecs.EncoderForVersion(protobufSerializer(t), corev1.SchemeGroupVersion)
			if err := encoder.Encode(&tt.list, &body); err != nil {
				t.Fatal(err)
			}
			list, pods, ok, err := decodeTrimmedPods(body.Bytes())
			if err != nil || !ok {
				t.Fatalf("ok %v, err %v", ok, err)
			}
			if !reflect.DeepEqual(list, tt.list.ListMeta) {
				t.Errorf("list meta %+v, want %+v", list, tt.list.ListMeta)
			}
			if len(pods) != len(tt.list.Items) {
				t.Fatalf("%d pods, want %d", len(pods), len(tt.list.Items))
			}
			for i := range pods {
				if want := TrimPod(&tt.list.Items[i]); !reflect.DeepEqual(pods[i], want) {
					t.Errorf("pod %d:\n%+v\nwant what TrimPod keeps:\n%+v", i, pods[i], want)
				}
			}
		})
	}
}

func TestABodyThatIsNotProtobufIsLeftToTheCodecs(t *testing.T) {
	if _, _, ok, _ := decodeTrimmedPods([]byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`)); ok {
		t.Error("a JSON body was taken for protobuf")
	}
}

func TestAProtobufBodyCutShortIsAnError(t *testing.T) {
	var body bytes.Buffer
	list := corev1.PodList{Items: []corev1.Pod{fullPod("web-1", map[string]string{"app": "web"})}}
	if err := codecs.EncoderForVersion(protobufSerializer(t), corev1.SchemeGroupVersion).Encode(&list, &body); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := decodeTrimmedPods(body.Bytes()[:body.Len()-7]); !ok || err == nil {
		t.Errorf("ok %v, err %v; want an error", ok, err)
	}
}

func TestAProtobufFieldLongerThanItsMessageIsAnError(t *testing.T) {
	// runtime.Unknown whose raw PodList (6 bytes) holds an item that says
	// it is 100 bytes long.
	body := append(slices.Clone(protobufPrefix), 0x12, 0x06, 0x12, 0x64, 'a', 'b', 'c', 'd')
	if _, _, ok, err := decodeTrimmedPods(body); !ok || !errors.Is(err, errBadProtobuf) {
		t.Errorf("ok %v, err %v; want a malformed body", ok, err)
	}
}

// A page of Pods whose connection drops in the middle of the body is asked
// for again, as any other answer cut short.
func TestAPageOfPodsCutShortIsRetried(t *testing.T) {
	var body bytes.Buffer
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		Items: []corev1.Pod{fullPod("web-1", map[string]string{"app": "web"}), fullPod("web-2", map[string]string{"app": "web"})}}
	if err := codecs.EncoderForVersion(protobufSerializer(t), corev1.SchemeGroupVersion).Encode(&list, &body); err != nil {
		t.Fatal(err)
	}
	c, calls := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, call int32) {
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		if call == 1 {
			w.Header().Set("Content-Length", strconv.Itoa(body.Len()))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(body.Bytes()[:body.Len()/2])
			panic(http.ErrAbortHandler)
		}
		_, _ = w.Write(body.Bytes())
	})
	var names []string
	if err := c.PodPages(context.Background(), "shop", "", func(pods []corev1.Pod, _ bool) {
		for _, p := range pods {
			names = append(names, p.Name)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"web-1", "web-2"}; !slices.Equal(names, want) {
		t.Errorf("pods %v, want %v", names, want)
	}
	wantRequests(t, calls, 2)
}

func protobufSerializer(t *testing.T) runtime.Encoder {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	return info.Serializer
}

// An API server that answers in protobuf and one that answers in JSON give
// ListPods the same Pods, trimmed, over two pages.
func TestPagesOfPodsInProtobufOrJSONGiveTheSamePods(t *testing.T) {
	sidecar := corev1.Container{Name: "proxy", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(15000)}}}}
	pages := []corev1.PodList{
		{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"}, Items: []corev1.Pod{
			fullPod("a-long-name-of-a-first-pod-that-fills-the-buffer", map[string]string{"app": "web", "tier": "front"}, sidecar),
			fullPod("b", map[string]string{"app": "web"}, sidecar)}},
		{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: []corev1.Pod{fullPod("c", nil, sidecar)}},
	}
	var want []corev1.Pod
	for _, p := range pages {
		for i := range p.Items {
			want = append(want, TrimPod(&p.Items[i]))
		}
	}
	for _, answer := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		t.Run(answer, func(t *testing.T) {
			c, _ := newTestClient(t, func(w http.ResponseWriter, r *http.Request, _ int32) {
				page := pages[0]
				if r.URL.Query().Get("continue") == "next" {
					page = pages[1]
				}
				page.APIVersion, page.Kind = "v1", "PodList"
				if answer == runtime.ContentTypeJSON {
					writeJSON(w, http.StatusOK, page)
					return
				}
				var body bytes.Buffer
				if err := codecs.EncoderForVersion(protobufSerializer(t), corev1.SchemeGroupVersion).Encode(&page, &body); err != nil {
					t.Error(err)
				}
				w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
				_, _ = w.Write(body.Bytes())
			})
			got, err := c.ListPods(context.Background(), "shop", "")
			if err != nil {
				t.Fatal(err)
			}
			if got.ResourceVersion != "42" || !reflect.DeepEqual(got.Items, want) {
				t.Errorf("pods (rv %q):\n%+v\nwant:\n%+v", got.ResourceVersion, got.Items, want)
			}
		})
	}
}
