package main

import (
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func schema(t *testing.T, s string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	p := &apiextensionsv1.JSONSchemaProps{}
	if err := yaml.UnmarshalStrict([]byte(s), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMergeSchema(t *testing.T) {
	dst := schema(t, `
type: object
required: [head, redisAddress]
properties:
  head: {type: object, required: [template], properties: {template: {type: object}}}
  redisAddress: {type: string}
  groups: {type: array, items: {type: object, properties: {name: {type: string}}}}
`)
	add := schema(t, `
type: object
required: [head]
properties:
  head: {type: object, properties: {ingress: {type: object, properties: {host: {type: string}}}}}
  redisAddress: {type: string}
  backend: {type: string, enum: [redis, rocksdb], x-kubernetes-validations: [{rule: self == oldSelf}]}
  groups: {type: array, items: {type: object, properties: {priority: {type: integer, default: 0}}}}
`)
	mergeSchema(dst, add)
	want := schema(t, `
type: object
required: [head]
properties:
  head: {type: object, required: [template], properties: {template: {type: object}, ingress: {type: object, properties: {host: {type: string}}}}}
  redisAddress: {type: string}
  backend: {type: string, enum: [redis, rocksdb], x-kubernetes-validations: [{rule: self == oldSelf}]}
  groups: {type: array, items: {type: object, properties: {name: {type: string}, priority: {type: integer, default: 0}}}}
`)
	if !reflect.DeepEqual(dst, want) {
		a, _ := yaml.Marshal(dst)
		b, _ := yaml.Marshal(want)
		t.Fatalf("merged:\n%s\nwant:\n%s", a, b)
	}
}
