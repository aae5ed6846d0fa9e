package dev.cowkv;

import static org.junit.jupiter.api.Assertions.assertEquals;

import cowkv.v1.FilesOuterClass;
import org.junit.jupiter.api.Test;

/** setattr sends exactly the fields an AttrChange names (FATTR_* bits), without a server. */
class AttrChangeTest {
  @Test
  void sendsExactlyTheFieldsNamed() {
    assertEquals(0, new AttrChange().fields());
    assertEquals(1, new AttrChange().mode(0600).fields());
    assertEquals(2, new AttrChange().uid(7).fields());
    assertEquals(4, new AttrChange().gid(7).fields());
    assertEquals(8, new AttrChange().size(5).fields());
    assertEquals(16, new AttrChange().atimeNs(1).fields());
    assertEquals(32, new AttrChange().mtimeNs(1).fields());
    assertEquals(128, new AttrChange().atimeNow().fields());
    assertEquals(256, new AttrChange().mtimeNow().fields());
    FilesOuterClass.SetAttrRequest r =
        new AttrChange().mode(0600).size(5).atimeNs(1_000_000_002L).request("sv", "/f");
    assertEquals(25, r.getFields());
    assertEquals(0600, r.getMode());
    assertEquals(5, r.getSize());
    assertEquals(1_000_000_002L, r.getAtimeNs());
    assertEquals(0, r.getUid());
    assertEquals("/f", r.getPath());
  }
}
