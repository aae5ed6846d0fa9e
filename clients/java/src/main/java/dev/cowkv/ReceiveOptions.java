package dev.cowkv;

/**
 * Options of {@link CowkvClient#receive}.
 *
 * @param name the new subvolume's name ("" = the snapshot's name at the sender)
 * @param resumable keep what arrived if the receive fails or is cut (a {@link PartialReceive})
 * @param dryRun check the stream and write nothing
 */
public record ReceiveOptions(String name, boolean resumable, boolean dryRun) {
  public ReceiveOptions {
    name = name == null ? "" : name;
  }

  /** Defaults: the sender's name, not resumable, not a dry run. */
  public static ReceiveOptions defaults() {
    return new ReceiveOptions("", false, false);
  }

  /** Receives as {@code name}. */
  public static ReceiveOptions named(String name) {
    return new ReceiveOptions(name, false, false);
  }

  /** This, resumable. */
  public ReceiveOptions withResumable() {
    return new ReceiveOptions(name, true, dryRun);
  }

  /** This, as a dry run. */
  public ReceiveOptions withDryRun() {
    return new ReceiveOptions(name, resumable, true);
  }
}
