// RwLock: a reader-writer lock that prefers writers. The default
// std::shared_mutex (glibc) lets a stream of overlapping readers starve a
// writer forever; the native store's readers hold the lock across device
// reads, so without writer preference a busy table would never accept a put.
//
// Thread safety: a lock. Satisfies SharedMutex, so std::unique_lock and
// std::shared_lock work with it. Not recursive.
#pragma once

#include <pthread.h>

#include "strata/assert.h"

namespace strata::storage {

class RwLock {
 public:
  RwLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    STRATA_ASSERT(pthread_rwlock_init(&lock_, &attr) == 0, "pthread_rwlock_init");
    pthread_rwlockattr_destroy(&attr);
  }
  ~RwLock() { pthread_rwlock_destroy(&lock_); }
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  void lock() { STRATA_ASSERT(pthread_rwlock_wrlock(&lock_) == 0, "wrlock"); }
  bool try_lock() { return pthread_rwlock_trywrlock(&lock_) == 0; }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() { STRATA_ASSERT(pthread_rwlock_rdlock(&lock_) == 0, "rdlock"); }
  bool try_lock_shared() { return pthread_rwlock_tryrdlock(&lock_) == 0; }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace strata::storage
