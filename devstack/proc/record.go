package proc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Record is what identifies a daemon, written when it is started: its process (pid and start
// time, so a pid handed out again is not mistaken for it) and the binary it was started from. It
// needs nothing else from whoever reads it: another checkout with other binaries, or the same one
// moved, stops exactly this process.
type Record struct {
	Identity
	Bin string `json:"bin"`
}

// Start records the process pid as a daemon started from bin. The process may have exited
// already, as long as it is not reaped (its parent calls this before Wait).
func Start(pid int, bin string) (Record, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return Record{}, fmt.Errorf("identify process %d: %w", pid, err)
	}
	return Record{Identity: Identity{Pid: pid, StartTicks: st.StartTicks}, Bin: bin}, nil
}

// WriteRecord writes r to path, atomically: a reader sees the old record or the new one.
func WriteRecord(path string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("record %s: %w", path, err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("record %s: %w", path, err)
	}
	return nil
}

// ReadRecord reads a record. A file that holds only a pid (a pid file of older tools) reads as a
// record with that pid and no start time or binary, which the caller has to confirm otherwise.
func ReadRecord(path string) (Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Record{}, err
	}
	return parseRecord(b)
}

func parseRecord(b []byte) (Record, error) {
	s := strings.TrimSpace(string(b))
	if pid, err := strconv.Atoi(s); err == nil {
		if pid <= 0 {
			return Record{}, fmt.Errorf("pid file: bad pid %d", pid)
		}
		return Record{Identity: Identity{Pid: pid}}, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Record{}, fmt.Errorf("daemon record: %w", err)
	}
	if r.Pid <= 0 || r.StartTicks == 0 {
		return Record{}, fmt.Errorf("daemon record %q: want a pid and a start time", s)
	}
	return r, nil
}
