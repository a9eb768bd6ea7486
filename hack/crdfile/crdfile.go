// Package crdfile reads and writes CustomResourceDefinition manifests for rayctl's generators
// (hack/crdmerge, hack/crdcopy), in the form controller-gen writes them.
package crdfile

import (
	"bytes"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Read reads one CRD, refusing fields the CRD type does not have.
func Read(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return crd, nil
}

// Write writes crd as controller-gen does: a document marker, and no status or creation timestamp.
func Write(path string, crd *apiextensionsv1.CustomResourceDefinition) error {
	data, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	delete(doc, "status")
	if meta, ok := doc["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(append([]byte("---\n"), bytes.TrimSpace(out)...), '\n'), 0o644)
}
