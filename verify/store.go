package verify

import "hash/maphash"

// store numbers byte strings (encoded states) in the order they were
// added. It holds no pointers, so that the garbage collector does not scan
// millions of keys: the keys are concatenated in data, and table is an
// open-addressing hash index of their numbers plus one.
type store struct {
	data  []byte
	off   []int64  // key i is data[off[i]:off[i+1]]
	hash  []uint32 // per key, for growing the table and comparing fast
	table []int32
	seed  maphash.Seed
}

func newStore() *store {
	return &store{off: []int64{0}, table: make([]int32, 1<<12), seed: maphash.MakeSeed()}
}

// len returns the number of keys.
func (st *store) len() int { return len(st.off) - 1 }

// key returns key i; the bytes must not be modified.
func (st *store) key(i int32) []byte { return st.data[st.off[i]:st.off[i+1]:st.off[i+1]] }

// find returns the number of b, or -1, and the table slot where b belongs.
func (st *store) find(b []byte, h uint32) (int32, int) {
	mask := len(st.table) - 1
	for slot := int(h) & mask; ; slot = (slot + 1) & mask {
		j := st.table[slot] - 1
		if j < 0 {
			return -1, slot
		}
		if st.hash[j] == h && string(st.key(j)) == string(b) {
			return j, slot
		}
	}
}

// lookup returns the number of b, or -1.
func (st *store) lookup(b []byte) int32 {
	j, _ := st.find(b, uint32(maphash.Bytes(st.seed, b)))
	return j
}

// add returns the number of b, adding it when new.
func (st *store) add(b []byte) (int32, bool) {
	h := uint32(maphash.Bytes(st.seed, b))
	j, slot := st.find(b, h)
	if j >= 0 {
		return j, false
	}
	j = int32(st.len())
	st.data = push(st.data, b...)
	st.off = push(st.off, int64(len(st.data)))
	st.hash = push(st.hash, h)
	st.table[slot] = j + 1
	if 2*st.len() > len(st.table) {
		st.grow()
	}
	return j, true
}

func (st *store) grow() {
	st.table = make([]int32, 2*len(st.table))
	mask := len(st.table) - 1
	for j, h := range st.hash {
		slot := int(h) & mask
		for st.table[slot] != 0 {
			slot = (slot + 1) & mask
		}
		st.table[slot] = int32(j) + 1
	}
}

// push appends v to s, doubling the capacity when it must grow (append
// grows large slices by a quarter, copying them over and over).
func push[T any](s []T, v ...T) []T {
	if len(s)+len(v) > cap(s) {
		n := make([]T, len(s), 2*cap(s)+len(v)+64)
		copy(n, s)
		s = n
	}
	return append(s, v...)
}
