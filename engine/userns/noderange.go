package userns

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// NodeRange is the node's range of IDs for pods (kubelet's
// getKubeletMappings): when the user KubeletUser exists in passwd and the
// subordinate ID files exist, its one entry in subUID, which must equal
// its one entry in subGID; otherwise every ID from 65536 on. Empty paths
// are the system's files.
func NodeRange(passwd, subUID, subGID string) (first, length uint32, err error) {
	passwd, subUID, subGID = or(passwd, "/etc/passwd"), or(subUID, "/etc/subuid"), or(subGID, "/etc/subgid")
	uid, ok, err := lookupUser(passwd, KubeletUser)
	if err != nil {
		return 0, 0, fmt.Errorf("user namespaces: %w", err)
	}
	if !ok {
		return defaultFirstID, defaultLength, nil
	}
	uids, err := subIDs(subUID, KubeletUser, uid)
	if os.IsNotExist(err) {
		// kubelet: no getsubids tool, the default range.
		return defaultFirstID, defaultLength, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("user namespaces: subordinate uids of user %q: %w", KubeletUser, err)
	}
	gids, err := subIDs(subGID, KubeletUser, uid)
	if err != nil {
		return 0, 0, fmt.Errorf("user namespaces: subordinate gids of user %q: %w", KubeletUser, err)
	}
	if len(uids) != 1 {
		return 0, 0, fmt.Errorf("user namespaces: %s has %d entries for user %q, want one", subUID, len(uids), KubeletUser)
	}
	if len(gids) != 1 || gids[0] != uids[0] {
		return 0, 0, fmt.Errorf("user namespaces: mismatched subuids and subgids for user %q (%s, %s)", KubeletUser, subUID, subGID)
	}
	return uids[0][0], uids[0][1], nil
}

func or(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// lookupUser finds name in the passwd file path; its UID as text.
func lookupUser(path, name string) (uid string, ok bool, err error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 3 && fields[0] == name {
			return fields[2], true, nil
		}
	}
	return "", false, sc.Err()
}

// subIDs are the entries (first, count) of the user name or its uid in the
// subordinate ID file path ("name:first:count" lines).
func subIDs(path, name, uid string) ([][2]uint32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][2]uint32
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 3 || (f[0] != name && f[0] != uid) {
			continue
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		out = append(out, [2]uint32{uint32(start), uint32(count)})
	}
	return out, nil
}
