// Package crdfile reads and writes CustomResourceDefinition manifests for rayctl's generators
// (hack/crdmerge, hack/crdcopy): YAML as controller-gen and the Gateway API publish them, and the JSON
// configs/crds holds: compact (a third of the YAML's size), as rayctl decodes the Ray CRDs at every cold
// start and hashes them at every start, and JSON decodes about four times faster than YAML. JSON is YAML
// too, so kubectl applies the files as they are (`jq . FILE` shows one indented).
package crdfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Read reads one CRD, YAML or JSON, refusing fields the CRD type does not have.
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

// Write writes crd as controller-gen does (no status or creation timestamp): as JSON, compact and with
// sorted keys, when path ends in .json; else as YAML after a document marker.
func Write(path string, crd *apiextensionsv1.CustomResourceDefinition) error {
	data, err := json.Marshal(crd)
	if err != nil {
		return err
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // bounds such as an int64's are kept as written
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	delete(doc, "status")
	if meta, ok := doc["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	var out bytes.Buffer
	if filepath.Ext(path) == ".json" {
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false) // CEL rules and patterns keep their < > & as written
		if err := enc.Encode(doc); err != nil {
			return err
		}
	} else {
		y, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		out.WriteString("---\n")
		out.Write(bytes.TrimSpace(y))
		out.WriteByte('\n')
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}
