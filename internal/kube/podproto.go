package kube

import (
	"bytes"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"google.golang.org/protobuf/encoding/protowire"
)

// A page of Pods in protobuf is decoded straight into trimmed Pods (what
// TrimPod keeps), skipping what a health check does not read: a Pod's
// status, volumes, annotations and managed fields are most of its bytes,
// and decoding them whole, only for TrimPod to drop them, was most of what
// a fleet with pod_health_checks allocated (bench/README.md, "Where the
// provider's time and memory go").

// protobufPrefix starts every protobuf body of the API server
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

var errBadProtobuf = errors.New("malformed protobuf PodList")

// Field numbers of k8s.io/api and apimachinery's generated.proto.
const (
	unknownRaw      = 2 // runtime.Unknown.raw
	listMetadata    = 1 // PodList.metadata
	listItems       = 2 // PodList.items
	podMetadata     = 1 // Pod.metadata
	podSpec         = 2 // Pod.spec
	metaName        = 1 // ObjectMeta.name
	metaNamespace   = 3 // ObjectMeta.namespace
	metaResourceVer = 6 // ObjectMeta.resourceVersion
	metaUID         = 5 // ObjectMeta.uid
	metaDeletion    = 9 // ObjectMeta.deletionTimestamp
	podStatus       = 3 // Pod.status
	statusConds     = 2 // PodStatus.conditions
	specGates       = 28
	metaLabels      = 11
	specContainers  = 2 // PodSpec.containers
	// Container.name, ports and readinessProbe.
	containerName           = 1
	containerPorts          = 6
	containerReadinessProbe = 11
	mapEntryKey             = 1
	mapEntryValue           = 2
)

// decodeTrimmedPods decodes a protobuf PodList body into its ListMeta and
// its Pods as TrimPod gives them. ok is false when body is not protobuf.
func decodeTrimmedPods(body []byte) (list metav1.ListMeta, pods []corev1.Pod, ok bool, err error) {
	rest, found := bytes.CutPrefix(body, protobufPrefix)
	if !found {
		return list, nil, false, nil
	}
	raw, err := field(rest, unknownRaw)
	if err != nil {
		return list, nil, true, err
	}
	// The page's Pods are counted first, so that their slice is made once
	// at its length rather than grown by append.
	n := 0
	if err := eachField(raw, func(num protowire.Number, _ []byte) error {
		if num == listItems {
			n++
		}
		return nil
	}); err != nil {
		return list, nil, true, err
	}
	pods = make([]corev1.Pod, 0, n)
	err = eachField(raw, func(num protowire.Number, v []byte) error {
		switch num {
		case listMetadata:
			return list.Unmarshal(v)
		case listItems:
			pod, err := decodeTrimmedPod(v)
			pods = append(pods, pod)
			return err
		}
		return nil
	})
	return list, pods, true, err
}

func decodeTrimmedPod(b []byte) (corev1.Pod, error) {
	pod := corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{}}}
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case podMetadata:
			return eachField(v, func(num protowire.Number, v []byte) error {
				switch num {
				case metaName:
					pod.Name = string(v)
				case metaNamespace:
					pod.Namespace = string(v)
				case metaResourceVer:
					pod.ResourceVersion = string(v)
				case metaUID:
					pod.UID = types.UID(v)
				case metaDeletion:
					at := &metav1.Time{}
					if err := at.Unmarshal(v); err != nil {
						return err
					}
					pod.DeletionTimestamp = at
				case metaLabels:
					var key, value string
					if err := eachField(v, func(num protowire.Number, v []byte) error {
						switch num {
						case mapEntryKey:
							key = string(v)
						case mapEntryValue:
							value = string(v)
						}
						return nil
					}); err != nil {
						return err
					}
					if pod.Labels == nil {
						pod.Labels = map[string]string{}
					}
					pod.Labels[key] = value
				}
				return nil
			})
		case podSpec:
			return eachField(v, func(num protowire.Number, v []byte) error {
				switch num {
				case specGates:
					var g corev1.PodReadinessGate
					if err := g.Unmarshal(v); err != nil {
						return err
					}
					pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, g)
				case specContainers:
					c, err := decodeTrimmedContainer(v)
					pod.Spec.Containers = append(pod.Spec.Containers, c)
					return err
				}
				return nil
			})
		case podStatus:
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num != statusConds {
					return nil
				}
				var c corev1.PodCondition
				if err := c.Unmarshal(v); err != nil {
					return err
				}
				pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status})
				return nil
			})
		}
		return nil
	})
	return pod, err
}

// decodeTrimmedContainer is a Container as TrimPod keeps it: its name,
// ports and readinessProbe (its environment, mounts and resources skipped).
func decodeTrimmedContainer(b []byte) (corev1.Container, error) {
	var c corev1.Container
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case containerName:
			c.Name = string(v)
		case containerPorts:
			var port corev1.ContainerPort
			if err := port.Unmarshal(v); err != nil {
				return err
			}
			c.Ports = append(c.Ports, port)
		case containerReadinessProbe:
			probe := &corev1.Probe{}
			if err := probe.Unmarshal(v); err != nil {
				return err
			}
			c.ReadinessProbe = probe
		}
		return nil
	})
	return c, err
}

// eachField calls f with each length-delimited field of the message b (the
// others, varints and fixed, are skipped: none of those read is one).
func eachField(b []byte, f func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errBadProtobuf, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("%w: %w", errBadProtobuf, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errBadProtobuf, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, v); err != nil {
			return err
		}
	}
	return nil
}

// field is the last length-delimited field num of the message b.
func field(b []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	err := eachField(b, func(n protowire.Number, v []byte) error {
		if n == num {
			out = v
		}
		return nil
	})
	return out, err
}
