package service

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestServicePortName(t *testing.T) {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "gcs-server", Port: 6379}, {Name: "dashboard", Port: 8265}}}}
	for in, want := range map[string]string{"8265": "dashboard", "dashboard": "dashboard", "6379": "gcs-server"} {
		if got, err := servicePortName(svc, in); err != nil || got != want {
			t.Errorf("servicePortName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"9999", "nope", ""} {
		if _, err := servicePortName(svc, in); !apierrors.IsServiceUnavailable(err) {
			t.Errorf("servicePortName(%q): %v, want a 503", in, err)
		}
	}
	unnamed := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if got, err := servicePortName(unnamed, ""); err != nil || got != "" {
		t.Errorf("the unnamed port of a one-port service = %q, %v", got, err)
	}
}
