// A YARN ResourceManager and NodeManager for the tests (tests/yarn.py), in one JVM: Hadoop's own MiniYARNCluster
// from org.apache.hadoop:hadoop-client-minicluster, run as a single-file source program
// (java -cp <minicluster jars> MiniYarn.java STATE_DIR [-D key=value]...). MiniHadoopClusterManager cannot start
// YARN from that artifact alone: it starts MapReduce's cluster, whose classes the shaded artifact does not ship.
//
// Once the ResourceManager has its ports and the NodeManager has registered, it writes the whole configuration it
// runs with (STATE_DIR/yarn-conf.xml), then STATE_DIR/details.json (the ready signal), each written whole then
// renamed; it stops the cluster (and with it the containers) on SIGTERM.

import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public class MiniYarn {
    public static void main(String[] args) throws Exception {
        File state = new File(args[0]);
        YarnConfiguration conf = new YarnConfiguration();
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].equals("-D") || i + 1 >= args.length || !args[i + 1].contains("=")) {
                throw new IllegalArgumentException("expected -D key=value, got " + args[i]);
            }
            String[] kv = args[i + 1].split("=", 2);
            conf.set(kv[0], kv[1]);
        }
        MiniYARNCluster cluster = new MiniYARNCluster("tableswap-yarn", 1, 1, 1);
        cluster.init(conf);
        Runtime.getRuntime().addShutdownHook(new Thread(cluster::stop));
        cluster.start();

        // The ResourceManager's address carries its real port only once it has bound it (YARN-2642).
        Configuration running = cluster.getConfig();
        long deadline = System.currentTimeMillis() + 120_000;
        while (running.get(YarnConfiguration.RM_ADDRESS, "").endsWith(":0")) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the ResourceManager did not bind its port in 120 s");
            }
            Thread.sleep(100);
        }
        if (!cluster.waitForNodeManagersToConnect(120_000)) {
            throw new IllegalStateException("the NodeManager did not register in 120 s");
        }
        File conf_file = new File(state, "yarn-conf.xml");
        File partial = new File(state, "yarn-conf.xml.part");
        try (OutputStream out = new FileOutputStream(partial)) {
            running.writeXml(out);
        }
        Files.move(partial.toPath(), conf_file.toPath(), StandardCopyOption.ATOMIC_MOVE);
        String details = "{\"resourcemanager_address\": \"" + running.get(YarnConfiguration.RM_ADDRESS)
                + "\", \"webapp_address\": \"" + running.get(YarnConfiguration.RM_WEBAPP_ADDRESS) + "\"}\n";
        File details_file = new File(state, "details.json");
        File details_partial = new File(state, "details.json.part");
        Files.write(details_partial.toPath(), details.getBytes(StandardCharsets.UTF_8));
        Files.move(details_partial.toPath(), details_file.toPath(), StandardCopyOption.ATOMIC_MOVE);
        System.out.println("MiniYarn ready: " + details.trim());
        Thread.currentThread().join();
    }
}
