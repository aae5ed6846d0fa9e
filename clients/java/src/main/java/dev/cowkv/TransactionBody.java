package dev.cowkv;

/** A body without a result, for {@link Subvolume#runTransaction}. */
@FunctionalInterface
public interface TransactionBody {
  void accept(Transaction tx);
}
