package dev.cowkv;

/** The body of {@link Subvolume#transaction}: may run more than once, so keep side effects out. */
@FunctionalInterface
public interface TransactionFunction<T> {
  T apply(Transaction tx);
}
