package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kinds are the objects deploy/ may hold, each with the API type it must
// decode into. Any other apiVersion and kind is an error: a manifest this
// package cannot check is one nobody checked.
var kinds = map[metav1.TypeMeta]func() any{
	{APIVersion: "v1", Kind: "Namespace"}:                            func() any { return new(corev1.Namespace) },
	{APIVersion: "v1", Kind: "Service"}:                              func() any { return new(corev1.Service) },
	{APIVersion: "apps/v1", Kind: "DaemonSet"}:                       func() any { return new(appsv1.DaemonSet) },
	{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}:      func() any { return new(networkingv1.NetworkPolicy) },
	{APIVersion: "monitoring.coreos.com/v1", Kind: "ServiceMonitor"}: func() any { return new(monitoringv1.ServiceMonitor) },
	{APIVersion: "monitoring.coreos.com/v1", Kind: "PrometheusRule"}: func() any { return new(monitoringv1.PrometheusRule) },
	{APIVersion: "v1", Kind: "ConfigMap"}:                            func() any { return new(corev1.ConfigMap) },
}

// Objects are the documents of one or more YAML streams, decoded.
type Objects struct {
	Namespaces      []*corev1.Namespace
	Services        []*corev1.Service
	DaemonSets      []*appsv1.DaemonSet
	ServiceMonitors []*monitoringv1.ServiceMonitor
	NetworkPolicies []*networkingv1.NetworkPolicy
	PrometheusRules []*monitoringv1.PrometheusRule
	ConfigMaps      []*corev1.ConfigMap
}

// Decode reads every document of a YAML stream (as kubectl and helm write
// them, separated by "---" lines) strictly: a field the type does not have,
// a key given twice or an unknown kind is an error naming the document.
// Documents that hold only comments are skipped, as kubectl does.
func Decode(name string, b []byte, into *Objects) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", name, n, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return fmt.Errorf("%s: document %d: %w", name, n, err)
		}
		if m == nil {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return fmt.Errorf("%s: document %d: %w", name, n, err)
		}
		mk, ok := kinds[tm]
		if !ok {
			return fmt.Errorf("%s: document %d: apiVersion %q kind %q is not one this check knows", name, n, tm.APIVersion, tm.Kind)
		}
		obj := mk()
		if err := unmarshalStrict(doc, obj); err != nil {
			return fmt.Errorf("%s: document %d (%s): %w", name, n, tm.Kind, err)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			into.Namespaces = append(into.Namespaces, o)
		case *corev1.Service:
			into.Services = append(into.Services, o)
		case *appsv1.DaemonSet:
			into.DaemonSets = append(into.DaemonSets, o)
		case *monitoringv1.ServiceMonitor:
			into.ServiceMonitors = append(into.ServiceMonitors, o)
		case *networkingv1.NetworkPolicy:
			into.NetworkPolicies = append(into.NetworkPolicies, o)
		case *monitoringv1.PrometheusRule:
			into.PrometheusRules = append(into.PrometheusRules, o)
		case *corev1.ConfigMap:
			into.ConfigMaps = append(into.ConfigMaps, o)
		}
	}
}

// unmarshalStrict decodes as the API server does with fieldValidation=Strict.
// Not encoding/json (nor yaml.UnmarshalStrict, which uses it): it matches
// keys to fields ignoring case, so "hostPid" would set hostPID and
// "readOnlyRootFileSystem" readOnlyRootFilesystem without a word, while the
// API server (case-sensitive) drops them.
func unmarshalStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc) // a key given twice is an error
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}
