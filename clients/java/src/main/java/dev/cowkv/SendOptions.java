package dev.cowkv;

/**
 * Options of {@link CowkvClient#send}: {@code SendOptions.full()},
 * {@code SendOptions.incremental("snap1")} or {@code SendOptions.resume(token)}.
 *
 * @param parent an older read-only snapshot of the lineage the receiver holds ("" = full)
 * @param resumeToken a {@link PartialReceive}'s token: send the rest of that stream ("" = none)
 */
public record SendOptions(String parent, String resumeToken) {
  public SendOptions {
    parent = parent == null ? "" : parent;
    resumeToken = resumeToken == null ? "" : resumeToken;
  }

  /** The whole snapshot. */
  public static SendOptions full() {
    return new SendOptions("", "");
  }

  /** Only the difference from {@code parent}. */
  public static SendOptions incremental(String parent) {
    return new SendOptions(parent, "");
  }

  /** The rest of the stream a resumable receive stopped in; the snapshot may then be "". */
  public static SendOptions resume(String token) {
    return new SendOptions("", token);
  }
}
