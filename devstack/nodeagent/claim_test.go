package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/d8virt/devstack/filelock"
)

func TestClaimNodeAdmitsOneAgent(t *testing.T) {
	root := t.TempDir()
	release, err := claimNode(root, "n1")
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	_, err = claimNode(root, "n1")
	if !errors.Is(err, filelock.ErrHeld) {
		t.Fatalf("second claim: %v, want ErrHeld", err)
	}
	for _, want := range []string{"node n1 already has a live agent", fmt.Sprintf("pid %d", os.Getpid()), "started from " + exe} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second claim's error %q lacks %q", err, want)
		}
	}
	if _, err := nodeIdle(root); !errors.Is(err, filelock.ErrHeld) || !strings.Contains(err.Error(), "still runs") {
		t.Errorf("cleanup while the agent runs: %v", err)
	}
	release()
	idle, err := nodeIdle(root)
	if err != nil {
		t.Fatalf("cleanup after the agent stopped: %v", err)
	}
	if _, err := claimNode(root, "n1"); !errors.Is(err, filelock.ErrHeld) {
		t.Errorf("an agent started during a cleanup: %v", err)
	}
	idle()
	release, err = claimNode(root, "n1")
	if err != nil {
		t.Fatalf("claim after the first agent stopped: %v", err)
	}
	release()
}
