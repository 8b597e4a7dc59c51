package phasegauge_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

type phase string

var phases = []phase{"Pending", "Ready"}

func TestValues(t *testing.T) {
	for _, tc := range []struct {
		phase phase
		want  map[phase]float64
	}{
		{"Pending", map[phase]float64{"Pending": 1, "Ready": 0}},
		{"Ready", map[phase]float64{"Pending": 0, "Ready": 1}},
	} {
		got := phasegauge.Values(phases, tc.phase)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.phase, got, tc.want)
		}
		for p, v := range tc.want {
			if got[p] != v {
				t.Errorf("%s: %v, want %v", tc.phase, got, tc.want)
			}
		}
	}
}

func list(objects ...phasegauge.Object[phase]) phasegauge.ListFunc[phase] {
	return func(context.Context) ([]phasegauge.Object[phase], error) { return objects, nil }
}

func TestGauge(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    prometheus.Collector
		want string
	}{
		{"namespaced", phasegauge.New(phasegauge.Opts{Name: "t_status_phase", Help: "h.", Namespaced: true}, phases,
			list(phasegauge.Object[phase]{Namespace: "ns", Name: "a", Phase: "Ready"})), `
# HELP t_status_phase h.
# TYPE t_status_phase gauge
t_status_phase{name="a",namespace="ns",phase="Pending"} 0
t_status_phase{name="a",namespace="ns",phase="Ready"} 1
`},
		{"cluster", phasegauge.New(phasegauge.Opts{Name: "t_status_phase", Help: "h."}, phases,
			list(phasegauge.Object[phase]{Name: "a", Phase: "Pending"}, phasegauge.Object[phase]{Name: "b", Phase: "Ready"})), `
# HELP t_status_phase h.
# TYPE t_status_phase gauge
t_status_phase{name="a",phase="Pending"} 1
t_status_phase{name="a",phase="Ready"} 0
t_status_phase{name="b",phase="Pending"} 0
t_status_phase{name="b",phase="Ready"} 1
`},
		{"joined", phasegauge.Join(
			phasegauge.New(phasegauge.Opts{Name: "t_status_phase", Help: "h."}, phases, list(phasegauge.Object[phase]{Name: "a", Phase: "Ready"})),
			phasegauge.New(phasegauge.Opts{Name: "u_status_phase", Help: "h."}, phases, list())), `
# HELP t_status_phase h.
# TYPE t_status_phase gauge
t_status_phase{name="a",phase="Pending"} 0
t_status_phase{name="a",phase="Ready"} 1
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := prometheus.NewPedanticRegistry().Register(tc.c); err != nil {
				t.Fatal(err)
			}
			if err := testutil.CollectAndCompare(tc.c, strings.NewReader(tc.want)); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestGaugeListError(t *testing.T) {
	g := phasegauge.New(phasegauge.Opts{Name: "t_status_phase", Help: "h."}, phases,
		func(context.Context) ([]phasegauge.Object[phase], error) { return nil, errors.New("down") })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(g)
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "list: down") {
		t.Fatalf("gather error %v, want the list error", err)
	}
}
