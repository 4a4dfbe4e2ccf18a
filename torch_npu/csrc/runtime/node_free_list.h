// Free lists for the small objects the caching allocator makes and drops on every
// allocation and free (its blocks, the tree nodes of its block sets).
//
// An npu operator's output takes a block out of a size-ordered set (often splitting it,
// which makes a new block and inserts the remainder) and its free puts the block back
// (merging with neighbours, which deletes blocks and set nodes): two to four malloc/free
// pairs per tensor on top of the allocator's own work. Recycling these objects of fixed
// size through a free list makes each of them a few instructions.
//
// Not thread-safe by design: every user runs under the caching allocator's mutex
// (allocator.cpp), which already serialises all of its state.
#pragma once

#include <cstddef>
#include <new>

namespace torch_npu {

// A LIFO list of spare memory chunks of `Size` bytes, at most `kMaxSpare` kept (a burst of
// frees does not pin memory forever). Never destroyed: frees may come at process exit.
template <size_t Size>
class ChunkFreeList {
 public:
  static void* take() {
    State& s = state();
    if (s.head == nullptr) return ::operator new(Size);
    Chunk* c = s.head;
    s.head = c->next;
    --s.spare;
    return c;
  }
  static void give(void* p) {
    State& s = state();
    if (s.spare >= kMaxSpare) {
      ::operator delete(p);
      return;
    }
    Chunk* c = static_cast<Chunk*>(p);
    c->next = s.head;
    s.head = c;
    ++s.spare;
  }
  static size_t spare() { return state().spare; }

 private:
  static constexpr size_t kMaxSpare = 1 << 14;
  struct Chunk {
    Chunk* next;
  };
  static_assert(Size >= sizeof(Chunk), "a chunk holds the list's link while spare");
  struct State {
    Chunk* head = nullptr;
    size_t spare = 0;
  };
  static State& state() {
    static State& s = *new State;
    return s;
  }
};

// A standard allocator that serves single objects (a node-based container's nodes) from
// the free list of their size; arrays go to the heap as usual.
template <typename T>
struct CachedNodeAllocator {
  using value_type = T;
  CachedNodeAllocator() noexcept = default;
  template <typename U>
  CachedNodeAllocator(const CachedNodeAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n == 1) return static_cast<T*>(ChunkFreeList<sizeof(T)>::take());
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n == 1) {
      ChunkFreeList<sizeof(T)>::give(p);
    } else {
      ::operator delete(p);
    }
  }
  template <typename U>
  bool operator==(const CachedNodeAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const CachedNodeAllocator<U>&) const noexcept {
    return false;
  }
};

}  // namespace torch_npu
