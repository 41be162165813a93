// A Hadoop key management server (KMS) for the tests (tests/support/kms.py), in one JVM: Hadoop's own MiniKMS from
// org.apache.hadoop:hadoop-kms's tests artifact, run as a single-file source program
// (java -cp <hadoop-kms jars> MiniKms.java STATE_DIR PORT KEY...). HDFS's encryption zones need one: the NameNode asks it
// for each new file's encrypted data key, and a client (Spark's Hadoop client, hdfs-native) asks it to decrypt that key.
//
// Its keys are in a Java key store (STATE_DIR/kms.keystore), KEY... created there before the server starts (an AES
// key each, 128 bits, as `hadoop key create` makes). Simple authentication, every user allowed (MiniKMS's own ACLs).
// It listens on 127.0.0.1:PORT (chosen by the caller, who can so start HDFS with its address at the same time).
// Once it listens it writes STATE_DIR/details.json (the ready signal: {"url": "http://127.0.0.1:PORT/kms"}),
// written whole then renamed; it stops on SIGTERM.

import java.io.File;
import java.io.FileWriter;
import java.io.Writer;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.crypto.key.KeyProvider;
import org.apache.hadoop.crypto.key.KeyProviderFactory;
import org.apache.hadoop.crypto.key.kms.server.KMSConfiguration;
import org.apache.hadoop.crypto.key.kms.server.MiniKMS;

public class MiniKms {
    public static void main(String[] args) throws Exception {
        File state = new File(args[0]);
        File confDir = new File(state, "conf");
        confDir.mkdirs();
        String keyStore = "jceks://file" + new File(state, "kms.keystore").getAbsolutePath();

        Configuration conf = new Configuration(false);
        conf.set(KMSConfiguration.KEY_PROVIDER_URI, keyStore);
        conf.set("hadoop.kms.authentication.type", "simple");
        try (Writer writer = new FileWriter(new File(confDir, KMSConfiguration.KMS_SITE_XML))) {
            conf.writeXml(writer);
        }
        KeyProvider keys = KeyProviderFactory.get(new URI(keyStore), new Configuration(false));
        int port = Integer.parseInt(args[1]);
        for (int i = 2; i < args.length; i++) {
            if (keys.getMetadata(args[i]) == null) {
                keys.createKey(args[i], new KeyProvider.Options(new Configuration(false)));
            }
        }
        keys.flush();

        MiniKMS kms = new MiniKMS.Builder().setKmsConfDir(confDir).setPort(port).build();
        Runtime.getRuntime().addShutdownHook(new Thread(kms::stop));
        kms.start();

        URI url = kms.getKMSUrl().toURI();
        String details = "{\"url\": \"http://127.0.0.1:" + url.getPort() + url.getPath().replaceAll("/+$", "") + "\"}\n";
        File partial = new File(state, "details.json.part");
        Files.write(partial.toPath(), details.getBytes(StandardCharsets.UTF_8));
        Files.move(partial.toPath(), new File(state, "details.json").toPath(), StandardCopyOption.ATOMIC_MOVE);
        Thread.currentThread().join();
    }
}
