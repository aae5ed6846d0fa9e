package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.ByteString;
import cowkv.v1.FilesGrpc;
import cowkv.v1.FilesOuterClass;
import cowkv.v1.KVGrpc;
import cowkv.v1.Kv;
import cowkv.v1.SubvolumesGrpc;
import cowkv.v1.SubvolumesOuterClass;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.StatusRuntimeException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * The bad-input pass: every invalid argument is refused by the client before it is sent
 * (no status code) with the exception class the server gives when the same request is sent
 * raw through the generated stubs.
 */
class BadInputTest {
  private static CowkvClient client;
  private static ManagedChannel raw;
  private static KVGrpc.KVBlockingStub kv;
  private static SubvolumesGrpc.SubvolumesBlockingStub subvolumes;
  private static FilesGrpc.FilesBlockingStub files;
  private static Subvolume sv;

  @BeforeAll
  static void setUp() {
    CowkvdServer server = CowkvdServer.shared();
    client = server.client();
    raw = ManagedChannelBuilder.forTarget(server.address()).usePlaintext()
        .maxInboundMessageSize(CowkvOptions.MAX_MESSAGE_BYTES).build();
    kv = KVGrpc.newBlockingStub(raw).withDeadlineAfter(30, TimeUnit.SECONDS);
    subvolumes = SubvolumesGrpc.newBlockingStub(raw).withDeadlineAfter(30, TimeUnit.SECONDS);
    files = FilesGrpc.newBlockingStub(raw).withDeadlineAfter(30, TimeUnit.SECONDS);
    client.createSubvolume("badinput");
    sv = client.subvolume("badinput");
    sv.files().mkdir("/d");
    sv.files().create("/d/f");
  }

  @AfterAll
  static void tearDown() {
    client.close();
    raw.shutdownNow();
  }

  /** The client refuses with InvalidArgumentException unsent; the server says the same class. */
  private static void same(Executable viaClient, Supplier<?> viaRaw) {
    InvalidArgumentException local = assertThrows(InvalidArgumentException.class, viaClient);
    assertNull(local.code(), "refused client-side, not by the server: " + local.getMessage());
    try {
      viaRaw.get();
      fail("the server accepted what the client refused: " + local.getMessage());
    } catch (StatusRuntimeException e) {
      CowkvException remote = Errors.fromStatus(e.getStatus(), "raw");
      assertSame(local.getClass(), remote.getClass(),
          "client " + local.getMessage() + " vs server " + e.getStatus());
    }
  }

  private static ByteString bytes(int n) {
    return ByteString.copyFrom(new byte[n]);
  }

  private static byte[] arr(int n) {
    byte[] b = new byte[n];
    java.util.Arrays.fill(b, (byte) 'k');
    return b;
  }

  @Test
  void emptyKey() {
    same(() -> sv.put(new byte[0], new byte[] {1}),
        () -> kv.put(Kv.PutRequest.newBuilder().setSubvolume("badinput").build()));
    same(() -> sv.getKv(new byte[0]),
        () -> kv.get(Kv.GetRequest.newBuilder().setSubvolume("badinput").build()));
    same(() -> sv.delete(new byte[0]),
        () -> kv.delete(Kv.DeleteRequest.newBuilder().setSubvolume("badinput").build()));
  }

  @Test
  void keyOver1024Bytes() {
    same(() -> sv.put(arr(1025), new byte[] {1}),
        () -> kv.put(Kv.PutRequest.newBuilder().setSubvolume("badinput").setKey(bytes(1025))
            .build()));
    same(() -> sv.get(arr(1025)),
        () -> kv.get(Kv.GetRequest.newBuilder().setSubvolume("badinput").setKey(bytes(1025))
            .build()));
  }

  @Test
  void valueOver16MiB() {
    int n = (16 << 20) + 1;
    same(() -> sv.put(arr(1), new byte[n]),
        () -> kv.put(Kv.PutRequest.newBuilder().setSubvolume("badinput").setKey(bytes(1))
            .setValue(bytes(n)).build()));
  }

  @Test
  void rangeBoundOver1025Bytes() {
    same(() -> sv.range(Range.between(arr(1026), null)).toList(),
        () -> kv.range(Kv.RangeRequest.newBuilder().setSubvolume("badinput")
            .setStart(bytes(1026)).build()));
  }

  @Test
  void deleteRangeWithoutBounds() {
    same(() -> sv.deleteRange((byte[]) null, null),
        () -> kv.deleteRange(Kv.DeleteRangeRequest.newBuilder().setSubvolume("badinput").build()));
  }

  @Test
  void subvolumeNameWithSlash() {
    same(() -> client.subvolume("a/b"),
        () -> kv.put(Kv.PutRequest.newBuilder().setSubvolume("a/b")
            .setKey(ByteString.copyFromUtf8("k")).build()));
    same(() -> client.createSubvolume("a/b"),
        () -> subvolumes.create(SubvolumesOuterClass.CreateSubvolumeRequest.newBuilder()
            .setName("a/b").build()));
    same(() -> client.snapshot("badinput", "snap/1", true),
        () -> subvolumes.snapshot(SubvolumesOuterClass.SnapshotRequest.newBuilder()
            .setSource("badinput").setName("snap/1").build()));
  }

  @Test
  void subvolumeNameEmptyOrTooLong() {
    same(() -> client.createSubvolume(""),
        () -> subvolumes.create(SubvolumesOuterClass.CreateSubvolumeRequest.getDefaultInstance()));
    String longName = "n".repeat(256);
    same(() -> client.createSubvolume(longName),
        () -> subvolumes.create(SubvolumesOuterClass.CreateSubvolumeRequest.newBuilder()
            .setName(longName).build()));
  }

  @Test
  void pathWithDotDot() {
    same(() -> sv.files().mkdir("/d/../x"),
        () -> files.mkdir(FilesOuterClass.MkdirRequest.newBuilder().setSubvolume("badinput")
            .setPath("/d/../x").build()));
    same(() -> sv.files().stat("/d/.."),
        () -> files.stat(FilesOuterClass.StatRequest.newBuilder().setSubvolume("badinput")
            .setPath("/d/..").build()));
    same(() -> sv.files().create("./f"),
        () -> files.create(FilesOuterClass.CreateFileRequest.newBuilder()
            .setSubvolume("badinput").setPath("./f").build()));
    same(() -> sv.files().rename("/d/f", "/d/../g"),
        () -> files.rename(FilesOuterClass.RenameRequest.newBuilder().setSubvolume("badinput")
            .setFrom("/d/f").setTo("/d/../g").build()));
  }

  @Test
  void pathTooLong() {
    String longPath = "/a".repeat(2049); // 4098 bytes
    same(() -> sv.files().mkdir(longPath),
        () -> files.mkdir(FilesOuterClass.MkdirRequest.newBuilder().setSubvolume("badinput")
            .setPath(longPath).build()));
    String longName = "/" + "x".repeat(256);
    same(() -> sv.files().create(longName),
        () -> files.create(FilesOuterClass.CreateFileRequest.newBuilder()
            .setSubvolume("badinput").setPath(longName).build()));
    String deep = "/a".repeat(257);
    same(() -> sv.files().stat(deep),
        () -> files.stat(FilesOuterClass.StatRequest.newBuilder().setSubvolume("badinput")
            .setPath(deep).build()));
  }

  @Test
  void symlinkTargetEmpty() {
    same(() -> sv.files().symlink("", "/d/l"),
        () -> files.symlink(FilesOuterClass.SymlinkRequest.newBuilder().setSubvolume("badinput")
            .setPath("/d/l").build()));
  }

  @Test
  void leaseOverTenMinutes() {
    same(() -> sv.begin(TransactionOptions.DEFAULT.withLeaseMs(600_001)),
        () -> kv.begin(Kv.BeginRequest.newBuilder().setSubvolume("badinput")
            .setLeaseMs(600_001).build()));
  }

  @Test
  void txnWithEmptyKeys() {
    same(() -> sv.txn().when(Compare.exists(new byte[0])).commit(),
        () -> kv.txn(Kv.TxnRequest.newBuilder().setSubvolume("badinput")
            .addCompare(Kv.Compare.newBuilder().setTarget(Kv.Compare.Target.TARGET_EXISTS))
            .build()));
    same(() -> sv.txn().then(Op.put(new byte[0], new byte[0])).commit(),
        () -> kv.txn(Kv.TxnRequest.newBuilder().setSubvolume("badinput")
            .addSuccess(Kv.RequestOp.newBuilder().setPut(Kv.PutOp.getDefaultInstance()))
            .build()));
  }

  @Test
  void interactiveKeysToo() {
    try (Transaction tx = sv.begin()) {
      assertThrows(InvalidArgumentException.class, () -> tx.put(new byte[0], new byte[0]));
      assertThrows(InvalidArgumentException.class, () -> tx.getKv(arr(1025)));
      same(() -> tx.delete(new byte[0]),
          () -> kv.txnDelete(Kv.TxnDeleteRequest.newBuilder().setHandle(tx.handle()).build()));
    }
  }
}
