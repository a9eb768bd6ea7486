package printers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
)

// now is the clock ages are measured against; tests replace it.
var now = time.Now

// RowFunc computes the cells of one object's row, one per column, in column
// order.
type RowFunc[T runtime.Object] func(obj T) []any

// ConditionsFunc computes the row conditions of one object's row (kubectl
// uses RowCompleted to recognise finished pods).
type ConditionsFunc[T runtime.Object] func(obj T) []metav1.TableRowCondition

// Convertor is the generic table convertor: a column list and a row function
// for objects of type T (e.g. *corev1.Pod). It implements
// rest.TableConvertor.
type Convertor[T runtime.Object] struct {
	columns    []metav1.TableColumnDefinition
	row        RowFunc[T]
	conditions ConditionsFunc[T]
}

var _ rest.TableConvertor = &Convertor[*metav1.PartialObjectMetadata]{}

// New returns a table convertor for objects of type T with the given columns
// and row function.
func New[T runtime.Object](columns []metav1.TableColumnDefinition, row RowFunc[T]) *Convertor[T] {
	return &Convertor[T]{columns: columns, row: row}
}

// WithConditions sets the function computing each row's conditions and
// returns c.
func (c *Convertor[T]) WithConditions(fn ConditionsFunc[T]) *Convertor[T] {
	c.conditions = fn
	return c
}

// Columns returns the column definitions of the table.
func (c *Convertor[T]) Columns() []metav1.TableColumnDefinition {
	return c.columns
}

// ConvertToTable renders object, a T or a list of T, as a table.
//
// tableOptions may be a *metav1.TableOptions: NoHeaders leaves out the column
// definitions, and IncludeObject picks what each row's object holds: the
// full object for "Object", else its metav1.PartialObjectMetadata (the
// default, which kubectl needs for names, namespaces and --show-labels). For
// "None" the row still carries the metadata here: the API server's handler
// drops row objects for "None" itself, after reading their annotations.
func (c *Convertor[T]) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	opts, _ := tableOptions.(*metav1.TableOptions)
	if opts == nil {
		opts = &metav1.TableOptions{}
	}
	table := &metav1.Table{}
	add := func(obj runtime.Object) error {
		typed, ok := obj.(T)
		if !ok {
			return fmt.Errorf("cannot print %T in a table of %T", obj, *new(T))
		}
		row := metav1.TableRow{Cells: c.row(typed)}
		if c.conditions != nil {
			row.Conditions = c.conditions(typed)
		}
		rowObj, err := rowObject(obj, opts.IncludeObject)
		if err != nil {
			return err
		}
		row.Object = runtime.RawExtension{Object: rowObj}
		table.Rows = append(table.Rows, row)
		return nil
	}
	if meta.IsListType(object) {
		table.Rows = []metav1.TableRow{}
		if err := meta.EachListItem(object, add); err != nil {
			return nil, err
		}
		if lm, err := meta.ListAccessor(object); err == nil {
			table.ResourceVersion = lm.GetResourceVersion()
			table.Continue = lm.GetContinue()
			table.RemainingItemCount = lm.GetRemainingItemCount()
		}
	} else {
		if err := add(object); err != nil {
			return nil, err
		}
		if m, err := meta.Accessor(object); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	if !opts.NoHeaders {
		table.ColumnDefinitions = c.columns
	}
	return table, nil
}

// rowObject returns what a row embeds for the given IncludeObject policy.
func rowObject(obj runtime.Object, policy metav1.IncludeObjectPolicy) (runtime.Object, error) {
	if policy == metav1.IncludeObject {
		return obj, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	partial := meta.AsPartialObjectMetadata(m)
	partial.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
	return partial, nil
}

// Age formats the time since t the way kubectl does ("5m", "3d2h"), or
// "<unknown>" for a zero time.
func Age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}

func microAge(t metav1.MicroTime) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}

// swagger descriptions shared by many columns.
var objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]}
}

func col(name, typ, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc}
}

func wideCol(name, typ, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Priority: 1, Description: desc}
}
